package client

// Handoffs is how many times the transport handed a stream to one of its
// goroutines (the rest of an answer stream, a GET stream).
func (s *Streamable) Handoffs() int64 { return s.pool.Tasks() }

package auth

// WithBearer returns p carrying tok as its validated bearer token, as
// Authenticate makes it, for comparisons in the external tests.
func WithBearer(p Principal, tok string) Principal {
	p.SetBearerToken(tok)
	return p
}

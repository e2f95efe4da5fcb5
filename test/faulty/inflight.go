package faulty

import (
	"context"
	"encoding/json"
	"sync"
)

// inflight is a connection's or session's calls being served, by request
// id, so notifications/cancelled can cancel one. Both transports keep one.
type inflight struct {
	mu    sync.Mutex
	calls map[string]context.CancelFunc
}

func (f *inflight) track(id json.RawMessage, cancel context.CancelFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]context.CancelFunc{}
	}
	f.calls[string(id)] = cancel
}

func (f *inflight) untrack(id json.RawMessage) {
	f.mu.Lock()
	delete(f.calls, string(id))
	f.mu.Unlock()
}

func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// cancel cancels the call a notifications/cancelled's params name; a
// malformed or unknown requestId is ignored, as the spec allows.
func (f *inflight) cancel(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	f.mu.Lock()
	cancel := f.calls[string(p.RequestID)]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

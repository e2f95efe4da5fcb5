package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// readEvents parses an SSE body.
func readEvents(t *testing.T, body []byte) []sse.Event {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(body), 1<<20)
	var out []sse.Event
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, ev)
	}
}

// A GET with Last-Event-ID gets the rest of its stream; when the replay
// log no longer has what the client missed, the stream's request is
// answered with CodeEventsPurged instead of a silent gap.
func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  sessions.Limits
		lastID  string // "" : the stream's first event
		want    []string
		purged  bool
		unknown bool
	}{
		{name: "the rest", limits: sessions.Limits{SessionEvents: 10, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, lastID: "1", want: []string{"two", "three"}},
		{name: "trimmed", limits: sessions.Limits{SessionEvents: 2, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, lastID: "0", purged: true},
		{name: "not this session's", limits: sessions.Limits{SessionEvents: 10, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, unknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sessions.NewStore(sessions.StoreOptions{Events: sessions.NewMemoryEvents(tc.limits, nil)})
			rte := &core.Route{Path: "/mcp", Gen: &core.Generation{Limits: core.Limits{MaxSessions: 1, MaxSessionsPerPrincipal: 1, MaxReplayStreams: 1}}}
			sess, err := st.Create(rte, mcp.Version20251125, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Remove(sess.ID())
			rw := newResumableWriter(httptest.NewRecorder(), sess.Events, "s1", jsonrpc.IntID(9), true)
			for _, d := range []string{"one", "two", "three"} {
				rw.write([]byte(d))
			}
			sess.Events.Finish("s1")

			lastID := "s1/" + tc.lastID
			if tc.unknown {
				lastID = "elsewhere/1"
			}
			r := httptest.NewRequest(http.MethodGet, "/mcp", nil).WithContext(context.Background())
			w := httptest.NewRecorder()
			if served := replay(w, r, sess, lastID, nil); served == tc.unknown {
				t.Fatalf("replay served = %v", served)
			}
			if tc.unknown {
				return
			}
			evs := readEvents(t, w.Body.Bytes())
			if tc.purged {
				var resp jsonrpc.Message
				if len(evs) != 1 || json.Unmarshal(evs[0].Data, &resp) != nil || resp.Error == nil ||
					resp.Error.Code != mcp.CodeEventsPurged || string(resp.ID) != "9" || !strings.Contains(resp.Error.Message, "sessions.replay") {
					t.Fatalf("purged replay sent %+v; want one error answer to request 9 with code %d", evs, mcp.CodeEventsPurged)
				}
				return
			}
			var got []string
			for _, e := range evs {
				got = append(got, string(e.Data))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("replayed %q, want %q", got, tc.want)
			}
		})
	}
}

// cutLog records the streams it was told were cut.
type cutLog struct {
	sessions.EventLog
	cuts []string
}

func (l *cutLog) Cut(stream string) { l.cuts = append(l.cuts, stream) }

// brokenConn is a ResponseWriter whose writes fail once broken is set.
type brokenConn struct {
	*httptest.ResponseRecorder
	broken bool
}

func (c *brokenConn) Write(p []byte) (int, error) {
	if c.broken {
		return 0, http.ErrHandlerTimeout // any error: the connection is gone
	}
	return c.ResponseRecorder.Write(p)
}

func (c *brokenConn) FlushError() error {
	if c.broken {
		return http.ErrHandlerTimeout
	}
	c.ResponseRecorder.Flush()
	return nil
}

// A stream delivered whole is never reported cut (with sessions.redis it
// then costs Redis nothing); the first failed write is (issue 36).
func TestResumableWriterReportsCut(t *testing.T) {
	for _, broken := range []bool{false, true} {
		log := &cutLog{EventLog: sessions.NewMemoryEvents(sessions.Limits{SessionEvents: 10, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, nil).Log("s")}
		conn := &brokenConn{ResponseRecorder: httptest.NewRecorder()}
		rw := newHeldWriter(conn, log, "s1", jsonrpc.IntID(1), true)
		rw.write([]byte("progress"))
		conn.broken = broken
		rw.write([]byte("more"))
		rw.writeLast([]byte("answer"))
		want := ""
		if broken {
			want = "s1"
		}
		if got := strings.Join(log.cuts, ","); got != want {
			t.Errorf("broken=%v: cuts = %q, want %q", broken, got, want)
		}
	}
}

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

// counts records what the proxy reports through its hooks.
type counts struct {
	mu             sync.Mutex
	results        map[string]int
	sent, received int64
	open           int
	denied         []string
}

func (c *counts) hooks() EgressHooks {
	return EgressHooks{
		Result: func(r string) { c.mu.Lock(); c.results[r]++; c.mu.Unlock() },
		Bytes:  func(s, r int64) { c.mu.Lock(); c.sent += s; c.received += r; c.mu.Unlock() },
		Open:   func(d int) { c.mu.Lock(); c.open += d; c.mu.Unlock() },
		Denied: func(t string) { c.mu.Lock(); c.denied = append(c.denied, t); c.mu.Unlock() },
	}
}

func (c *counts) result(r string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.results[r] }

// startProxy serves a proxy on a loopback listener, as the launcher's
// socket would be served.
func startProxy(t *testing.T, allow []string, maxTunnels int) (string, *counts, *egressProxy) {
	t.Helper()
	c := &counts{results: map[string]int{}}
	p, err := newEgressProxy("up", allow, maxTunnels, c.hooks())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); p.serve(ln) }()
	t.Cleanup(func() { p.close(); <-done })
	return ln.Addr().String(), c, p
}

// ask sends raw to the proxy and returns its whole answer.
func ask(t *testing.T, proxy, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func origin(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEgressProxyAllowsOnlyListed(t *testing.T) {
	srv := origin(t)
	other := origin(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// Listed in another case and with a trailing dot: compared normalized.
	proxy, c, _ := startProxy(t, []string{"LocalHost.:" + port, srv.Listener.Addr().String()}, 4)

	out := ask(t, proxy, "CONNECT "+srv.Listener.Addr().String()+" HTTP/1.1\r\nHost: x\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if !strings.Contains(out, "200 Connection established") || !strings.Contains(out, "hello /tunnel") {
		t.Errorf("CONNECT to a listed host: %q", out)
	}
	// A name: resolved by the proxy, not the child.
	out = ask(t, proxy, "GET http://localhost:"+port+"/plain HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	if !strings.Contains(out, "hello /plain") {
		t.Errorf("absolute-form GET to a listed host: %q", out)
	}
	for _, target := range []string{
		other.Listener.Addr().String(), // another port
		"127.0.0.2:" + port,            // another address
		"localhost:" + port + "0",
	} {
		// The request after the CONNECT ends a tunnel opened in error.
		out = ask(t, proxy, "CONNECT "+target+" HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(out, "HTTP/1.1 403") || !strings.Contains(out, "upstreams.up.sandbox.egress") {
			t.Errorf("CONNECT %s: %q, want 403 naming the key", target, out)
		}
	}
	if got := c.result(EgressDenied); got != 3 {
		t.Errorf("denied counted %d times, want 3", got)
	}
	if got := c.result(EgressAllowed); got != 2 {
		t.Errorf("allowed counted %d times, want 2", got)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == 0 || c.received == 0 || len(c.denied) != 3 {
		t.Errorf("bytes sent %d received %d, denied %v", c.sent, c.received, c.denied)
	}
}

func TestEgressProxyRefusesMalformed(t *testing.T) {
	srv := origin(t)
	addr := srv.Listener.Addr().String()
	proxy, c, _ := startProxy(t, []string{addr}, 4)
	for name, raw := range map[string]string{
		"huge head":     "CONNECT " + addr + " HTTP/1.1\r\nX: " + strings.Repeat("a", 64<<10) + "\r\n\r\n",
		"userinfo":      "GET http://u:p@" + addr + "/ HTTP/1.1\r\n\r\n",
		"https absform": "GET https://" + addr + "/ HTTP/1.1\r\n\r\n",
		"origin form":   "GET / HTTP/1.1\r\nHost: " + addr + "\r\n\r\n",
		"http/2 line":   "PRI * HTTP/2.0\r\n\r\n",
		"no port":       "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
		"signed port":   "CONNECT 127.0.0.1:+" + strings.Split(addr, ":")[1] + " HTTP/1.1\r\n\r\n",
	} {
		out := ask(t, proxy, raw)
		if !strings.HasPrefix(out, "HTTP/1.1 400") && !strings.HasPrefix(out, "HTTP/1.1 403") {
			t.Errorf("%s: %q, want a refusal", name, out)
		}
	}
	// A long target is refused and reported clipped: the child writes it,
	// and it goes to logs and status.
	long := strings.Repeat("a", 8000) + ".example:443"
	if out := ask(t, proxy, "CONNECT "+long+" HTTP/1.1\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 403") {
		t.Errorf("long target: %.100q, want 403", out)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.results[EgressAllowed] != 0 {
		t.Errorf("a malformed request was relayed: %v", c.results)
	}
	if n := len(c.denied); n == 0 {
		t.Error("the long target's refusal was not reported")
	} else if len(c.denied[n-1]) > 400 {
		t.Errorf("refused target reported at %d bytes, want clipped", len(c.denied[n-1]))
	}
}

// The tunnels bound: a child holding every slot gets a clear refusal for
// the next, counted; a freed slot is usable again.
func TestEgressProxyTunnelsBounded(t *testing.T) {
	srv := origin(t)
	addr := srv.Listener.Addr().String()
	proxy, c, _ := startProxy(t, []string{addr}, 2)
	// open holds a tunnel open and returns its answer's first line.
	open := func() (net.Conn, string) {
		conn, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		io.WriteString(conn, "CONNECT "+addr+" HTTP/1.1\r\n\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return conn, line
	}
	var held []net.Conn
	for i := 0; i < 2; i++ {
		conn, line := open()
		if !strings.Contains(line, "200") {
			t.Fatalf("tunnel %d: %q", i, line)
		}
		held = append(held, conn)
	}
	out := ask(t, proxy, "CONNECT "+addr+" HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 503") || !strings.Contains(out, "egress_max_tunnels") {
		t.Fatalf("third tunnel: %q, want 503 naming egress_max_tunnels", out)
	}
	if c.result(EgressOverLimit) != 1 {
		t.Errorf("over_limit counted %d", c.result(EgressOverLimit))
	}
	held[0].Close()
	testwait.Until(t, "a freed tunnel slot", func() bool {
		conn, line := open()
		conn.Close()
		return strings.Contains(line, "200 Connection established")
	})
}

// close ends open tunnels: a child's exit leaves nothing behind.
func TestEgressProxyCloseEndsTunnels(t *testing.T) {
	srv := origin(t)
	addr := srv.Listener.Addr().String()
	proxy, c, p := startProxy(t, []string{addr}, 2)
	conn, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "CONNECT "+addr+" HTTP/1.1\r\n\r\n")
	br := bufio.NewReader(conn)
	if line, _ := br.ReadString('\n'); !strings.Contains(line, "200") {
		t.Fatalf("tunnel: %q", line)
	}
	p.close()
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("read after close: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open != 0 {
		t.Errorf("open tunnels after close: %d", c.open)
	}
}

// close does not wait out a dial under way: the child is gone.
func TestEgressProxyCloseCancelsDial(t *testing.T) {
	c := &counts{results: map[string]int{}}
	dialing := make(chan struct{})
	h := c.hooks()
	h.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		close(dialing)
		<-ctx.Done() // a host that never answers
		return nil, ctx.Err()
	}
	p, err := newEgressProxy("up", []string{"192.0.2.1:443"}, 2, h)
	if err != nil {
		t.Fatal(err)
	}
	p.dialMax = time.Hour // only close can end this dial within the test
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); p.serve(ln) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "CONNECT 192.0.2.1:443 HTTP/1.1\r\n\r\n")
	testwait.Recv(t, dialing, "the dial to start")
	closed := make(chan struct{})
	go func() { defer close(closed); p.close() }()
	testwait.Recv(t, closed, "close to return before the dial timeout")
	testwait.Recv(t, served, "serve to end")
}

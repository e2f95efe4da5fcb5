package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The egress proxy is the only way out of a child with Network "egress":
// its network namespace has loopback alone, and on it a listening socket
// the launcher made and handed to the gateway (see the launcher). The
// gateway accepts on that socket and serves a small HTTP proxy there:
// CONNECT host:port, or a plain-HTTP request in absolute form, to the
// host:port pairs listed and nowhere else. Names are resolved by the
// gateway, so the child needs no DNS of its own.

// Egress results (EgressHooks.Result).
const (
	EgressAllowed    = "allowed"     // a tunnel opened to a listed host
	EgressDenied     = "denied"      // a host:port not listed
	EgressOverLimit  = "over_limit"  // the tunnels bound was reached
	EgressBadRequest = "bad_request" // not a proxy request the gateway reads
	EgressDialFailed = "dial_failed" // listed, but the gateway could not reach it
)

// DefaultEgressMaxTunnels bounds one child's open proxy connections when
// the spec sets no bound.
const DefaultEgressMaxTunnels = 32

const (
	egressHeadMax     = 16 << 10 // request line and headers
	egressHeadTimeout = 10 * time.Second
	egressDialTimeout = 10 * time.Second
	egressTargetMax   = 300 // bytes of a refused target reported
)

// EgressHooks are the gateway's side of the egress proxy: how it dials
// and what it counts. Every field may be nil.
type EgressHooks struct {
	// Dial reaches a listed host:port (nil: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Result learns each proxy connection's outcome (the Egress* results).
	Result func(result string)
	// Bytes learns bytes relayed: sent by the child, received for it.
	Bytes func(sent, received int64)
	// Open learns the open tunnels' count changing by delta.
	Open func(delta int)
	// Denied learns the host:port (as the child asked for it) of a
	// refused request, for logs and status.
	Denied func(target string)
}

// NormalizeEgress reads an allowlist entry or a requested target,
// "host:port", into the form both are compared in: the host in lower
// case without a trailing dot, the port a number from 1 to 65535.
func NormalizeEgress(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, port)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", fmt.Errorf("%q has no host", s)
	}
	if ip := net.ParseIP(host); ip != nil {
		return net.JoinHostPort(ip.String(), port), nil
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return "", fmt.Errorf("%q: %q is not a host name", s, host)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// egressProxy serves one sandboxed start's proxy socket.
type egressProxy struct {
	upstream string
	allow    map[string]bool
	hooks    EgressHooks
	slots    chan struct{} // one per open connection: the tunnels bound
	ctx      context.Context
	cancel   context.CancelFunc // by close: a dial under way ends with the child
	dialMax  time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open connections, both sides, closed by close
	closed bool
	wg     sync.WaitGroup
}

func newEgressProxy(upstream string, allow []string, maxTunnels int, hooks EgressHooks) (*egressProxy, error) {
	if maxTunnels <= 0 {
		maxTunnels = DefaultEgressMaxTunnels
	}
	p := &egressProxy{upstream: upstream, allow: map[string]bool{}, hooks: hooks,
		slots: make(chan struct{}, maxTunnels), conns: map[net.Conn]struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.dialMax = egressDialTimeout
	for _, a := range allow {
		n, err := NormalizeEgress(a)
		if err != nil {
			return nil, fmt.Errorf("sandbox: upstream %q: egress %w", upstream, err)
		}
		p.allow[n] = true
	}
	if p.hooks.Dial == nil {
		d := &net.Dialer{}
		p.hooks.Dial = d.DialContext
	}
	return p, nil
}

func (p *egressProxy) result(r string) {
	if p.hooks.Result != nil {
		p.hooks.Result(r)
	}
}

// track adds c to the connections close ends; false once closed.
func (p *egressProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *egressProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serve accepts on ln until it is closed (by close, or with the child).
func (p *egressProxy) serve(ln net.Listener) {
	defer ln.Close()
	if !p.track(closerConn{ln}) {
		return
	}
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors and the like: passing, and the
			// listener must outlive it; a pause keeps it from spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case p.slots <- struct{}{}:
		default:
			// Refused at once, in the accept loop: no goroutine for it.
			p.result(EgressOverLimit)
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			refuse(c, "503 Service Unavailable", fmt.Sprintf("too many open egress connections (%d); raise upstreams.%s.sandbox.egress_max_tunnels", cap(p.slots), p.upstream))
			c.Close()
			continue
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-p.slots }()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// close ends the proxy: its socket and every open tunnel, and waits for
// the connections' goroutines.
func (p *egressProxy) close() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// closerConn lets the listener sit in conns, closed with them.
type closerConn struct{ io.Closer }

func (closerConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (closerConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (closerConn) LocalAddr() net.Addr              { return nil }
func (closerConn) RemoteAddr() net.Addr             { return nil }
func (closerConn) SetDeadline(time.Time) error      { return nil }
func (closerConn) SetReadDeadline(time.Time) error  { return nil }
func (closerConn) SetWriteDeadline(time.Time) error { return nil }

func refuse(c net.Conn, status, msg string) {
	fmt.Fprintf(c, "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n", status, len(msg)+1, msg)
}

// handle reads one proxy request and relays it, or refuses it.
func (p *egressProxy) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(egressHeadTimeout))
	br := bufio.NewReaderSize(c, 4096)
	head, err := readHead(br)
	if err != nil {
		p.result(EgressBadRequest)
		refuse(c, "400 Bad Request", "mcpgw egress proxy: "+err.Error())
		return
	}
	target, connect, err := requestTarget(head)
	if err != nil {
		p.result(EgressBadRequest)
		refuse(c, "400 Bad Request", "mcpgw egress proxy: "+err.Error())
		return
	}
	norm, err := NormalizeEgress(target)
	if err != nil || !p.allow[norm] {
		p.result(EgressDenied)
		if len(target) > egressTargetMax {
			// The child writes it; logs and status keep a bounded copy.
			target = target[:egressTargetMax] + "…"
		}
		if p.hooks.Denied != nil {
			p.hooks.Denied(target)
		}
		refuse(c, "403 Forbidden", fmt.Sprintf("mcpgw egress proxy: %s is not allowed; list it in upstreams.%s.sandbox.egress", target, p.upstream))
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.dialMax)
	up, err := p.hooks.Dial(ctx, "tcp", norm)
	cancel()
	if err != nil {
		p.result(EgressDialFailed)
		refuse(c, "502 Bad Gateway", fmt.Sprintf("mcpgw egress proxy: %s: %v", target, err))
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	p.result(EgressAllowed)
	if p.hooks.Open != nil {
		p.hooks.Open(1)
		defer p.hooks.Open(-1)
	}
	_ = c.SetReadDeadline(time.Time{})
	var first []byte
	if connect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	} else {
		// The request goes on as the child wrote it: an origin server
		// takes the absolute form. The connection stays tied to this
		// host: later requests on it go here too, whatever they name.
		first = head
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		first = append(first, b...)
	}
	p.relay(c, up, first)
}

// relay copies both ways until both are done, counting bytes; each
// side's end is passed on as a half close.
func (p *egressProxy) relay(c, up net.Conn, first []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(first) > 0 {
			n, err := up.Write(first)
			p.count(int64(n), 0)
			if err != nil {
				return
			}
		}
		p.copy(up, c, true)
		closeWrite(up)
	}()
	p.copy(c, up, false)
	closeWrite(c)
	<-done
}

func (p *egressProxy) count(sent, received int64) {
	if p.hooks.Bytes != nil && (sent > 0 || received > 0) {
		p.hooks.Bytes(sent, received)
	}
}

func (p *egressProxy) copy(dst io.Writer, src io.Reader, sent bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			if sent {
				p.count(int64(w), 0)
			} else {
				p.count(0, int64(w))
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// readHead reads the request line and headers, up to the blank line.
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if len(head) > egressHeadMax {
			return nil, fmt.Errorf("request head over %d bytes", egressHeadMax)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the request: %v", err)
		}
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			if len(head) == len(line) {
				head = head[:0] // blank lines before the request line
				continue
			}
			return head, nil
		}
	}
}

// requestTarget is the host:port a request asks for, and whether it is a
// CONNECT (else a plain-HTTP request in absolute form).
func requestTarget(head []byte) (string, bool, error) {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	parts := strings.Split(strings.TrimRight(string(line), "\r"), " ")
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/1.") {
		return "", false, errors.New("not an HTTP/1 request line")
	}
	method, target := parts[0], parts[1]
	if method == "CONNECT" {
		return target, true, nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		return "", false, fmt.Errorf("%s %.100q: use CONNECT host:port, or an absolute http:// URL", method, target)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port), false, nil
}

// Package redistest starts a real redis-server for tests: on a free
// loopback port, without persistence, in the test's temp dir, stopped at
// the test's end. Without the binary the test is skipped, unless
// MCPGW_REQUIRE_REDIS=1 (CI installs it), which fails it instead.
package redistest

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	t    testing.TB
	dir  string
	port int
	cmd  *exec.Cmd
}

// Start runs a redis-server for t, stopped by t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("MCPGW_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found and MCPGW_REQUIRE_REDIS=1: install it (apt-get install redis-server)")
		}
		t.Skip("redis-server not installed (apt-get install redis-server); set MCPGW_REQUIRE_REDIS=1 to fail instead")
	}
	s := &Server{t: t, dir: t.TempDir(), port: freePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.start(bin)
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again on the same port after Stop (empty:
// nothing is persisted).
func (s *Server) Restart() {
	s.t.Helper()
	bin, _ := exec.LookPath("redis-server")
	s.start(bin)
}

func (s *Server) start(bin string) {
	s.t.Helper()
	cmd := exec.Command(bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil { // output to /dev/null
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond); err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 16)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			_ = c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redis-server did not answer on %s within 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it (idempotent).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

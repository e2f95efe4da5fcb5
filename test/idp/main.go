// Command idp is a real OAuth 2.1 / OpenID Connect provider for mcpgw's
// tests, on loopback: zitadel/oidc's example OP (github.com/zitadel/oidc/v3
// example/server/{storage,exampleop}) with the users and clients of a JSON
// file. It issues JWT access tokens by the authorization code flow with
// PKCE behind a username/password login form, refresh tokens, client
// credentials, and RFC 8693 token exchange, and counts the token
// endpoint's requests by grant type at GET /test/stats.
//
// It prints one JSON line, {"issuer":"http://127.0.0.1:PORT/"}, on stdout
// once it serves, and exits on SIGTERM/SIGINT or, with -exit-on-eof, when
// its stdin closes (so a test that dies leaves no OP behind).
//
// It is a module of its own (test/idp/go.mod) so zitadel never enters the
// gateway's dependencies; test/idp/build.sh builds it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback; port 0 picks one)")
	config := flag.String("config", "", "JSON file of users and clients (required; see README.md)")
	exitOnEOF := flag.Bool("exit-on-eof", false, "exit when stdin closes")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()
	if err := run(*addr, *config, *exitOnEOF, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "idp:", err)
		os.Exit(1)
	}
}

func run(addr, configPath string, exitOnEOF, verbose bool) error {
	if configPath == "" {
		return errors.New("-config FILE is required (users and clients; see test/idp/README.md)")
	}
	cfg, lifetime, err := loadConfig(configPath)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	counts := &counter{byGrant: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /test/stats", counts.serve)
	st := newStore(cfg, lifetime)
	mux.Handle("/", counts.wrap(newModes(cfg, st, issuer, exampleop.SetupServer(issuer, st, logger, false))))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if exitOnEOF {
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	line, _ := json.Marshal(map[string]string{"issuer": issuer})
	fmt.Println(string(line))
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// counter counts token endpoint requests by grant_type, so a test can see
// how often the gateway really asked (a cache that works asks once).
type counter struct {
	mu      sync.Mutex
	byGrant map[string]int
}

func (c *counter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			c.mu.Lock()
			c.byGrant[form.Get("grant_type")]++
			c.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (c *counter) serve(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"token_requests": c.byGrant})
}

// Package tlsconf builds the gateway's TLS configurations from files and
// reads the files again when they change, so that a certificate rotated
// on disk (cert-manager, a renewed secret) is used by the next handshake
// without a restart and without touching open connections.
//
// No goroutine watches the files: a handshake checks them, at most once
// per ReloadInterval, by their contents. A change that does not load (a
// key written before its certificate) keeps the previous material and is
// tried again at the next check, so a rotation in progress never fails a
// handshake that the old files would have passed.
package tlsconf

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
)

// DefaultReloadInterval is the least time between two checks of the files.
const DefaultReloadInterval = time.Second

// Options are what the TLS configurations share.
type Options struct {
	Logger *zap.Logger
	// Now is the clock of the reload checks (nil: time.Now).
	Now func() time.Time
	// ReloadInterval: see DefaultReloadInterval.
	ReloadInterval time.Duration
	// ReadFile reads the files (nil: os.ReadFile).
	ReadFile func(string) ([]byte, error)
	// Host is an upstream URL's host: the name a client connection that
	// sent no SNI (an IP address, through a proxy) is verified against.
	Host string
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
}

// Version reads a min_version value ("" is TLS 1.2).
func Version(v string) uint16 {
	if v == "1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// material is one loading of the files.
type material struct {
	cert *tls.Certificate // nil when no cert_file
	pool *x509.CertPool   // nil when no CA file
}

// files loads a set of files and reloads them when their contents change.
type files struct {
	what    string // names the configuration in errors: "tls", "upstream \"x\""
	paths   []string
	load    func(contents [][]byte) (*material, error)
	opts    Options
	checked atomic.Int64 // unix nanos of the last check
	cur     atomic.Pointer[material]
	mu      sync.Mutex
	sum     [sha256.Size]byte
	// Reloads counts material loaded after the first (tests, logs).
	reloads atomic.Int64
}

// read loads the files' contents and their digest.
func (f *files) read() ([][]byte, [sha256.Size]byte, error) {
	h := sha256.New()
	out := make([][]byte, len(f.paths))
	for i, p := range f.paths {
		if p == "" {
			continue
		}
		b, err := f.opts.ReadFile(p)
		if err != nil {
			return nil, [sha256.Size]byte{}, fmt.Errorf("%s: cannot read %s: %w", f.what, p, err)
		}
		out[i] = b
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return out, sum, nil
}

// init loads the files for the first time.
func (f *files) init() error {
	contents, sum, err := f.read()
	if err != nil {
		return err
	}
	m, err := f.load(contents)
	if err != nil {
		return err
	}
	f.sum = sum
	f.cur.Store(m)
	f.checked.Store(f.opts.Now().UnixNano())
	return nil
}

// get returns the current material, first reloading it if the files
// changed since the last check (at most once per ReloadInterval).
func (f *files) get() *material {
	now := f.opts.Now().UnixNano()
	if now-f.checked.Load() < int64(f.opts.ReloadInterval) {
		return f.cur.Load()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if now-f.checked.Load() < int64(f.opts.ReloadInterval) {
		return f.cur.Load() // another handshake checked meanwhile
	}
	f.checked.Store(now)
	contents, sum, err := f.read()
	if err != nil {
		f.opts.Logger.Warn("TLS files unreadable; still using the ones loaded before", zap.String("tls", f.what), zap.Error(err))
		return f.cur.Load()
	}
	if sum == f.sum {
		return f.cur.Load()
	}
	m, err := f.load(contents)
	if err != nil {
		// Likely mid-rotation (the key written, not yet its certificate):
		// the next check tries again.
		f.opts.Logger.Warn("changed TLS files do not load; still using the ones loaded before", zap.String("tls", f.what), zap.Error(err))
		return f.cur.Load()
	}
	f.sum = sum
	f.cur.Store(m)
	f.reloads.Add(1)
	f.opts.Logger.Info("TLS files reloaded", zap.String("tls", f.what), zap.Strings("files", nonEmpty(f.paths)))
	return m
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// keyPair parses a certificate (and chain) and its key.
func keyPair(what, certFile, keyFile string, certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: cert_file %s and key_file %s: %w (both PEM; the key must be the certificate's)", what, certFile, keyFile, err)
	}
	return &c, nil
}

// caPool parses a PEM CA bundle.
func caPool(what, key, file string, pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s %s holds no PEM certificate; give the CA certificate(s) in PEM", what, key, file)
	}
	return pool, nil
}

// Server is a listener's TLS configuration.
type Server struct {
	f      files
	cfg    config.ListenerTLS
	base   *tls.Config
	client tls.ClientAuthType
}

// NewServer loads t's files; what names the configuration (e.g. "tls",
// "admin.tls") in errors and logs.
func NewServer(what string, t *config.ListenerTLS, opts Options) (*Server, error) {
	opts.defaults()
	s := &Server{cfg: *t}
	s.f = files{what: what, paths: []string{t.CertFile, t.KeyFile, t.ClientCAFile}, opts: opts, load: s.load}
	switch {
	case t.ClientCAFile == "":
		s.client = tls.NoClientCert
	case t.ClientAuth == config.ClientAuthOptional:
		s.client = tls.VerifyClientCertIfGiven
	default:
		s.client = tls.RequireAndVerifyClientCert
	}
	if err := s.f.init(); err != nil {
		return nil, err
	}
	s.base = &tls.Config{
		MinVersion: Version(t.MinVersion),
		NextProtos: []string{"http/1.1"},
		// Every handshake takes the files' current material.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.config(s.f.get()), nil },
	}
	return s, nil
}

func (s *Server) load(c [][]byte) (*material, error) {
	cert, err := keyPair(s.f.what, s.cfg.CertFile, s.cfg.KeyFile, c[0], c[1])
	if err != nil {
		return nil, err
	}
	m := &material{cert: cert}
	if s.cfg.ClientCAFile != "" {
		if m.pool, err = caPool(s.f.what, "client_ca_file", s.cfg.ClientCAFile, c[2]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (s *Server) config(m *material) *tls.Config {
	return &tls.Config{
		MinVersion:   Version(s.cfg.MinVersion),
		NextProtos:   []string{"http/1.1"},
		Certificates: []tls.Certificate{*m.cert},
		ClientAuth:   s.client,
		ClientCAs:    m.pool,
	}
}

// Config is the tls.Config to serve with (tls.NewListener).
func (s *Server) Config() *tls.Config { return s.base }

// Reloads is how many times changed files were loaded.
func (s *Server) Reloads() int64 { return s.f.reloads.Load() }

// Client is an upstream's TLS configuration.
type Client struct {
	f        files
	upstream string
	cfg      config.UpstreamTLS
	base     *tls.Config
}

// NewClient loads t's files for upstream name. A nil t gives the system's
// trust store with TLS 1.2 at least.
func NewClient(name string, t *config.UpstreamTLS, opts Options) (*Client, error) {
	opts.defaults()
	if t == nil {
		t = &config.UpstreamTLS{}
	}
	c := &Client{upstream: name, cfg: *t}
	what := fmt.Sprintf("upstream %q", name)
	c.f = files{what: what, paths: []string{t.CertFile, t.KeyFile, t.CAFile}, opts: opts, load: c.load}
	if err := c.f.init(); err != nil {
		return nil, err
	}
	if t.InsecureSkipVerify {
		opts.Logger.Warn("upstream TLS certificate NOT VERIFIED (tls.insecure_skip_verify: true): anyone on the path can impersonate this upstream; give tls.ca_file instead", zap.String("upstream", name))
	}
	c.base = &tls.Config{
		MinVersion: Version(t.MinVersion),
		ServerName: t.ServerName,
		// Verification is ours (verify), against the CA file's current
		// contents and with errors that name the upstream.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection:   func(cs tls.ConnectionState) error { return c.verify(cs, "") },
		// Resumed sessions skip a full handshake on each new connection;
		// sessions of material replaced since are not resumed, so a
		// rotated client certificate is presented at once.
		ClientSessionCache: &genCache{gen: c.generation, lru: tls.NewLRUClientSessionCache(64)},
	}
	if t.CertFile != "" {
		c.base.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.f.get().cert, nil
		}
	}
	return c, nil
}

func (c *Client) load(b [][]byte) (*material, error) {
	m := &material{}
	var err error
	if c.cfg.CertFile != "" {
		if m.cert, err = keyPair(c.f.what+" tls", c.cfg.CertFile, c.cfg.KeyFile, b[0], b[1]); err != nil {
			return nil, err
		}
	}
	if c.cfg.CAFile != "" {
		if m.pool, err = caPool(c.f.what, "tls.ca_file", c.cfg.CAFile, b[2]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Config is the tls.Config of a connection whose host is not known here
// (through a proxy): the certificate must carry tls.server_name, else the
// SNI sent, else (an IP address sends none) Options.Host. Use ConfigFor
// where the dialed host is known.
func (c *Client) Config() *tls.Config { return c.base }

// ConfigFor is the tls.Config of one connection to host (a name or an IP
// address, without port): the certificate must carry tls.server_name, or
// else host.
func (c *Client) ConfigFor(host string) *tls.Config {
	x := c.base.Clone()
	if x.ServerName == "" {
		x.ServerName = host
	}
	name := x.ServerName
	x.VerifyConnection = func(cs tls.ConnectionState) error { return c.verify(cs, name) }
	return x
}

// Generation checks the files (at most once per ReloadInterval) and
// returns how many times they were reloaded: a transport whose kept
// connections were made with older material closes them when it changes.
func (c *Client) Generation() int64 { return c.generation() }

// generation checks the files and returns how often they were reloaded.
func (c *Client) generation() int64 {
	c.f.get()
	return c.f.reloads.Load()
}

// genCache keeps resumable sessions per generation of the files.
type genCache struct {
	gen func() int64
	lru tls.ClientSessionCache
}

func (g *genCache) key(k string) string { return strconv.FormatInt(g.gen(), 10) + "\x00" + k }
func (g *genCache) Get(k string) (*tls.ClientSessionState, bool) {
	return g.lru.Get(g.key(k))
}
func (g *genCache) Put(k string, cs *tls.ClientSessionState) { g.lru.Put(g.key(k), cs) }

// Reloads is how many times changed files were loaded.
func (c *Client) Reloads() int64 { return c.f.reloads.Load() }

// verify checks the upstream's certificate and says what is wrong with it
// in words an operator can act on, naming the upstream.
func (c *Client) verify(cs tls.ConnectionState, name string) error {
	if c.cfg.InsecureSkipVerify {
		return nil
	}
	m := c.f.get()
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("upstream %q: TLS: the server sent no certificate", c.upstream)
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if name == "" {
		name = c.cfg.ServerName
	}
	if name == "" {
		name = cs.ServerName
	}
	if name == "" {
		name = c.f.opts.Host
	}
	if name == "" {
		// An IP address sends no SNI; never verify without a name.
		return fmt.Errorf("upstream %q: TLS: no name to verify the certificate against; set upstreams.%s.tls.server_name", c.upstream, c.upstream)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: m.pool, Intermediates: inter})
	if err == nil {
		return nil
	}
	return c.explain(err, leaf, name)
}

// explain turns a verification error into one that names the upstream,
// the problem and the fix.
func (c *Client) explain(err error, leaf *x509.Certificate, name string) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	trust := "the system's trust store"
	if c.cfg.CAFile != "" {
		trust = "tls.ca_file " + c.cfg.CAFile
	}
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("upstream %q: TLS: certificate signed by unknown authority (subject %q, issuer %q): %s does not hold its CA; set upstreams.%s.tls.ca_file to the CA that signs it: %w",
			c.upstream, leaf.Subject.String(), leaf.Issuer.String(), trust, c.upstream, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("upstream %q: TLS: certificate name mismatch: it is for %s, not %q; fix the upstream's url, or set upstreams.%s.tls.server_name to a name it carries: %w",
			c.upstream, certNames(leaf), name, c.upstream, err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		now := c.f.opts.Now()
		state := "expired at " + leaf.NotAfter.UTC().Format(time.RFC3339)
		if now.Before(leaf.NotBefore) {
			state = "not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339)
		}
		return fmt.Errorf("upstream %q: TLS: certificate %s (now %s); the upstream must renew it: %w",
			c.upstream, state, now.UTC().Format(time.RFC3339), err)
	}
	return fmt.Errorf("upstream %q: TLS: certificate not accepted: %w", c.upstream, err)
}

func certNames(c *x509.Certificate) string {
	var b bytes.Buffer
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = append(names, "CN "+c.Subject.CommonName)
	}
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	if b.Len() == 0 {
		return "no name"
	}
	return b.String()
}

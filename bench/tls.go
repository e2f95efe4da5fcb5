package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The tls scenario: the small tools/call through mcpgw over plain HTTP on
// both sides, and over TLS on both sides (the listener serving a
// certificate, the upstream reached by https and verified with its CA),
// alternating, the two gateways in front of one upstream process that
// serves both. What it shows is TLS's own cost per call: the listener's
// record layer, the upstream connection's, and whatever handshakes the
// keep-alive pools and session resumption leave.

// benchCerts is a CA and a server certificate for 127.0.0.1, made for one
// run and written into the working directory.
type benchCerts struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

func (b *bench) makeCerts() (*benchCerts, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpgw bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &benchCerts{
		caFile:   filepath.Join(b.dir, "tls-ca.pem"),
		certFile: filepath.Join(b.dir, "tls.crt"),
		keyFile:  filepath.Join(b.dir, "tls.key"),
		pool:     x509.NewCertPool(),
	}
	c.pool.AddCert(ca)
	for path, blk := range map[string]*pem.Block{
		c.caFile:   {Type: "CERTIFICATE", Bytes: caDER},
		c.certFile: {Type: "CERTIFICATE", Bytes: leafDER},
		c.keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// tlsCalls is the tls scenario: rows "mcpgw" (http → http) and
// "mcpgw-tls" (https → https) at each concurrency, over legacy sessions.
func (b *bench) tlsCalls(ctx context.Context) error {
	certs, err := b.makeCerts()
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	b.c.trust(certs.pool)
	tlsPort, err := freePort()
	if err != nil {
		return err
	}
	up, err := b.start("upstream", roleUpstream, "-big", "16", "-tls-addr", fmt.Sprintf("127.0.0.1:%d", tlsPort), "-tls-cert", certs.certFile, "-tls-key", certs.keyFile)
	if err != nil {
		return err
	}
	b.upstream = up
	plainCfg, err := b.writeConfig("plain.yaml", fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: %s/mcp\nroutes:\n  - path: /mcp\n", up.mcpURL))
	if err != nil {
		return err
	}
	tlsCfg, err := b.writeConfig("tls.yaml", fmt.Sprintf(`listen: 127.0.0.1:0
tls: {cert_file: %q, key_file: %q}
upstreams:
  up:
    url: https://127.0.0.1:%d/mcp
    tls: {ca_file: %q}
routes:
  - path: /mcp
`, certs.certFile, certs.keyFile, tlsPort, certs.caFile))
	if err != nil {
		return err
	}
	plain, err := b.start("mcpgw", roleGateway, "-config", plainCfg)
	if err != nil {
		return err
	}
	secure, err := b.start("mcpgw-tls", roleGateway, "-config", tlsCfg)
	if err != nil {
		return err
	}
	eps := []endpoint{
		{name: "mcpgw", url: plain.mcpURL + "/mcp", tool: "up__echo", middle: plain},
		{name: "mcpgw-tls", url: secure.mcpURL + "/mcp", tool: "up__echo", middle: secure},
	}
	sessions, err := b.pairSessions(ctx, eps) // pair.go
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "\n## tools/call (small echo) over TLS on both sides, %d × %s per row, alternating (at c=1 the rows' calls interleaved)\n\n", b.o.reps, b.o.dur)
	fmt.Fprintln(b.out, "| c | target | calls/s | p50 | p99 | added p50 vs plain | CPU/call | ÷ plain: CPU/call | new upstream conns | errors |")
	fmt.Fprintln(b.out, "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range b.o.conc {
		mk := func(ep endpoint, dur time.Duration) load {
			return load{conc: c, tool: ep.tool, args: `{"text":"hello"}`, want: []byte(`hello`), dur: dur, sessions: sessions[ep.name]}
		}
		rows, err := b.pairCell(ctx, "tls", c, eps, mk) // pair.go
		if err != nil {
			return err
		}
		var plainP50 time.Duration
		var plainLat []time.Duration
		for i, ep := range eps {
			st := &rows[i]
			lat := sortDurations(st.lat)
			added, ratio := "—", "—"
			if i == 0 {
				plainP50, plainLat = pct(lat, 50), lat
			} else {
				added = addedDur(pct(lat, 50)-plainP50, addedHalfWidth(lat, plainLat))
				ratio = pairRatio(st, &rows[0])
			}
			tput := 0.0
			if st.wall > 0 {
				tput = float64(st.calls) / st.wall.Seconds()
			}
			fmt.Fprintf(b.out, "| %d | %s | %.0f | %s | %s | %s | %s | %s | %d | %d |\n",
				c, ep.name, tput, fmtDur(pct(lat, 50)), fmtDur(pct(lat, 99)), added, st.perCall(st.cpu), ratio, st.conns, st.errs)
		}
	}
	return nil
}

// trust makes the load generator's connections (its wire connections and
// its net/http client) verify https endpoints with pool, resuming TLS
// sessions as a browser or SDK client would.
func (c *caller) trust(pool *x509.CertPool) {
	c.tlsConfig = &tls.Config{RootCAs: pool, ClientSessionCache: tls.NewLRUClientSessionCache(1024)}
	c.hc.Transport.(*http.Transport).TLSClientConfig = c.tlsConfig
}

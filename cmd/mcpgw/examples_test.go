package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// Every example under configs/examples passes mcpgw validate, which checks
// what run reads at start (files exist and parse), given the inputs its
// header names: MCPGW_LISTEN for all, for tls.yaml certificates and keys
// made here, for login.yaml a provider and its client secret file, and
// for interceptors.yaml the hook's URL.
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "configs", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	t.Setenv("MCPGW_LISTEN", "127.0.0.1:8080")
	dir := t.TempDir()
	clients, servers := tlstest.NewCA(t, "clients"), tlstest.NewCA(t, "servers")
	listener, gatewayClient := servers.Server(t, "mcp.example.com"), clients.Client(t, "mcpgw")
	for name, value := range map[string]string{
		"MCPGW_TLS_CERT":                 tlstest.Write(t, dir, "tls.crt", listener.CertPEM),
		"MCPGW_TLS_KEY":                  tlstest.Write(t, dir, "tls.key", listener.KeyPEM),
		"MCPGW_CLIENT_CA":                tlstest.Write(t, dir, "clients.pem", clients.PEM),
		"MCPGW_UPSTREAM_URL":             "https://upstream.example.com/mcp",
		"MCPGW_UPSTREAM_CA":              tlstest.Write(t, dir, "servers.pem", servers.PEM),
		"MCPGW_UPSTREAM_CLIENT_CERT":     tlstest.Write(t, dir, "client.crt", gatewayClient.CertPEM),
		"MCPGW_UPSTREAM_CLIENT_KEY":      tlstest.Write(t, dir, "client.key", gatewayClient.KeyPEM),
		"MCPGW_ALLOWED_CN":               "alice",
		"MCPGW_PUBLIC_URL":               "https://mcp.example.com",
		"MCPGW_LOGIN_ISSUER":             "https://login.example.com",
		"MCPGW_LOGIN_CLIENT_ID":          "mcpgw",
		"MCPGW_LOGIN_CLIENT_SECRET_FILE": tlstest.Write(t, dir, "login-secret", []byte("op-secret\n")),
		"MCPGW_HOOK_URL":                 "http://127.0.0.1:9090/intercept",
	} {
		t.Setenv(name, value)
	}
	// login-per-user.yaml: also the per-user upstream's authorization
	// server and its client secret file, state in STATE_DIRECTORY.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"MCPGW_UPSTREAM_ISSUER":             "https://auth.saas.example.com",
		"MCPGW_UPSTREAM_CLIENT_ID":          "mcpgw",
		"MCPGW_UPSTREAM_CLIENT_SECRET_FILE": tlstest.Write(t, dir, "saas-secret", []byte("s3cret\n")),
		"MCPGW_EXECUTABLE":                  exe,
		"STATE_DIRECTORY":                   t.TempDir(),
	} {
		t.Setenv(name, value)
	}
	for _, f := range files {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"validate", "--config", f}, &stdout, &stderr); code != 0 {
			t.Errorf("mcpgw validate %s: exit %d\n%s%s", f, code, stdout.String(), stderr.String())
		}
	}
}

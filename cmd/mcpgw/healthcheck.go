package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// cmdHealthcheck asks a running gateway's admin listener whether it is
// ready, for container HEALTHCHECKs on images without curl or a shell
// (distroless). It exits 0 when the endpoint answers 200, 1 otherwise.
func cmdHealthcheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw healthcheck [--url URL] [--timeout D]")
	url := fs.String("url", "http://127.0.0.1:9091/readyz", "the admin endpoint to ask (`URL`); /healthz checks liveness only")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after `D`")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw healthcheck: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgw healthcheck: --url %q: %v\n", *url, err)
		return exitUsage
	}
	// Never through a proxy from the environment: the admin listener is local.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgw healthcheck: %v (is the admin listener on? set admin.listen or --admin-listen)\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "mcpgw healthcheck: %s answered %s\n%s", *url, resp.Status, body)
		return 1
	}
	fmt.Fprintf(stdout, "ok: %s answered %s\n", *url, resp.Status)
	return 0
}

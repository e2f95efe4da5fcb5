package gateway_test

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// The status page as a person sees it in a real browser (headless
// Chromium, no JavaScript needed): a screenshot, and the rendered page's
// text showing each upstream's name and state, the one that is down too.
func TestStatusPageInChromium(t *testing.T) {
	bin := gatewaytest.Chromium(t)
	_, _, admin := statusGateway(t, false)

	shot := filepath.Join(t.TempDir(), "status.png")
	gatewaytest.RunChromium(t, bin, "--window-size=1280,900", "--screenshot="+shot, admin+"/")
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 900 {
		t.Errorf("screenshot is %v, want 1280x900", b)
	}
	// Not a blank page: the state badges colour some pixels.
	colours := map[uint32]bool{}
	for y := 0; y < img.Bounds().Dy(); y += 4 {
		for x := 0; x < img.Bounds().Dx(); x += 4 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>12<<8|g>>12<<4|b>>12] = true
		}
	}
	if len(colours) < 5 {
		t.Errorf("the screenshot has %d colours: a blank page?", len(colours))
	}
	if dir := os.Getenv("MCPGW_SCREENSHOT_DIR"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "status.png"), data, 0o644)
	}

	dom := string(gatewaytest.RunChromium(t, bin, "--dump-dom", admin+"/"))
	text := regexp.MustCompile(`<[^>]+>`).ReplaceAllString(dom, " ")
	text = strings.Join(strings.Fields(text), " ")
	// beta is down: "down" between attempts, "breaker_open" once it has
	// failed fast enough times in a row.
	for _, want := range []string{`alpha ready 2025-11-25`, `beta (down|breaker_open) `} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the rendered page does not show %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, "Upstreams") || !strings.Contains(text, "Routes") || !strings.Contains(text, "Reloads") {
		t.Errorf("sections missing:\n%s", text)
	}
}

// With admin.token_file the status page still works in a browser: the
// token as the Basic password (the credentials a browser sends after the
// 401's Basic challenge, here given in the URL) opens it; without, the
// browser is shown nothing of it.
func TestStatusPageInChromiumWithToken(t *testing.T) {
	bin := gatewaytest.Chromium(t)
	tokFile := filepath.Join(t.TempDir(), "admin-token")
	const tok = "browser-admin-token-0123456789"
	if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, _, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: \"127.0.0.1:0\", token_file: %s}\nupstreams:\n  alpha: {url: %s}\n", tokFile, alpha), gateway.Options{})

	withCreds := strings.Replace(admin, "http://", "http://operator:"+tok+"@", 1) + "/"
	dom := string(gatewaytest.RunChromium(t, bin, "--dump-dom", withCreds))
	if !strings.Contains(dom, `data-name="alpha" data-state="ready"`) {
		t.Errorf("with the token: the rendered page does not show alpha ready:\n%s", dom)
	}
	dom = string(gatewaytest.RunChromium(t, bin, "--dump-dom", admin+"/"))
	if strings.Contains(dom, `data-name="alpha"`) {
		t.Errorf("without the token: the page shows the status:\n%s", dom)
	}
}

// Issue 27.4 as a browser meets it: a name that resolves to the admin
// listener's address (what DNS rebinding achieves; here a resolver rule)
// gets the refusal, not the catalog, while the address itself is served.
func TestAdminRebindingInChromium(t *testing.T) {
	bin := gatewaytest.Chromium(t)
	_, _, admin := statusGateway(t, false)
	port := admin[strings.LastIndex(admin, ":")+1:]
	rule := "--host-resolver-rules=MAP attacker.example 127.0.0.1"
	dom := string(gatewaytest.RunChromium(t, bin, rule, "--dump-dom", "http://attacker.example:"+port+"/status/catalog?route=/mcp"))
	if strings.Contains(dom, "alpha__echo") || !strings.Contains(dom, "DNS-rebinding protection") {
		t.Errorf("through a rebound name: want the refusal, got:\n%.2000s", dom)
	}
	if dom := string(gatewaytest.RunChromium(t, bin, rule, "--dump-dom", admin+"/status/catalog?route=/mcp")); !strings.Contains(dom, "alpha__echo") {
		t.Errorf("through the address: want the catalog, got:\n%.2000s", dom)
	}
}

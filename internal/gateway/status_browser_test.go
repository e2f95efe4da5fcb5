package gateway_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromiumFlags run a headless Chromium that touches nothing outside its
// fresh profile and reaches only the page it is given.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-dev-shm-usage", "--hide-scrollbars",
}

// chromium finds the browser, skipping the test when it is not installed
// unless MCPGW_REQUIRE_CHROMIUM is set (.ci/run sets it and installs the
// Debian package chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MCPGW_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed and MCPGW_REQUIRE_CHROMIUM is set: apt-get install chromium")
	}
	t.Skip("chromium is not installed (apt-get install chromium; set MCPGW_REQUIRE_CHROMIUM=1 to require it)")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir() // a fresh profile every run
	cmd := exec.CommandContext(ctx, bin, append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+profile), args...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile) // nothing written to the real home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// The status page as a person sees it in a real browser (headless
// Chromium, no JavaScript needed): a screenshot, and the rendered page's
// text showing each upstream's name and state, the one that is down too.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	_, _, admin := statusGateway(t, false)

	shot := filepath.Join(t.TempDir(), "status.png")
	runChromium(t, bin, "--window-size=1280,900", "--screenshot="+shot, admin+"/")
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

	dom := string(runChromium(t, bin, "--dump-dom", admin+"/"))
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

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// it is 100 on every Linux architecture Go supports.
const clockTicks = 100

// child is one process of the benchmark, started by the parent.
type child struct {
	name     string
	cmd      *exec.Cmd
	mcpURL   string // base URL of its MCP listener
	statsURL string
}

// start runs this binary in role with args and waits for its READY line.
// Its stderr goes to dir/name.log.
func start(dir, name, role string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{role}, args...)...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own children go with it
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		f := strings.Fields(l)
		if !ok || len(f) != 3 || f[0] != "READY" {
			c.stop()
			return nil, fmt.Errorf("%s did not start (see %s)", name, logf.Name())
		}
		c.mcpURL, c.statsURL = f[1], f[2]
	case <-time.After(90 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s did not start within 90s (see %s)", name, logf.Name())
	}
	return c, nil
}

// stop ends the child and its process group: SIGTERM, then SIGKILL.
func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

// procSample is what /proc and /stats say about a child at one moment.
type procSample struct {
	cpu     time.Duration // utime+stime
	rss     int64         // VmRSS, bytes
	mallocs uint64
	alloc   uint64 // bytes allocated, cumulative
	heap    uint64
	conns   int64 // connections its MCP listener accepted
}

// sample reads the child's CPU time, RSS and allocation count; gc collects
// first (for heap sizes, not on the measured path).
func (c *child) sample(gc bool) (procSample, error) {
	if c == nil {
		return procSample{}, nil
	}
	pid := c.cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return procSample{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	s := procSample{cpu: cpu, rss: parseStatusKB(status, "VmRSS:") * 1024}
	u := c.statsURL + "/stats"
	if gc {
		u += "?gc=1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return procSample{}, err
	}
	defer resp.Body.Close()
	var ms memStats
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		return procSample{}, fmt.Errorf("%s /stats: %w", c.name, err)
	}
	s.mallocs, s.alloc, s.heap, s.conns = ms.Mallocs, ms.TotalAlloc, ms.HeapAlloc, ms.Conns
	return s, nil
}

// selfCPU is this process's CPU time so far (user and system): the load
// generator's own cost, which shares the cores with what it measures.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss reads only VmRSS (cheap enough to poll during a run).
func (c *child) rss() int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return parseStatusKB(status, "VmRSS:") * 1024
}

// parseStatCPU returns utime+stime from /proc/<pid>/stat. The command name
// (field 2) may hold spaces, so fields are counted after its closing ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no ')' in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// After ')': state is field 3, so utime (14) and stime (15) are f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: utime %q stime %q are not numbers", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// parseStatusKB returns the kB value of key in /proc/<pid>/status, or 0.
func parseStatusKB(status []byte, key string) int64 {
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

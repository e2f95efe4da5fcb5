package client

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// readLine returns each line whole, whatever its length against the
// buffer, allocated at its size; refuses one longer than max and goes on
// with the next; and returns an unterminated last line.
func TestReadLine(t *testing.T) {
	const buf = 16 // small, so that long lines span many buffers
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []string // lines, "!" for errLineTooLong
	}{
		{"short", "a\nbc\n", 100, []string{"a\n", "bc\n"}},
		{"buffer sized", strings.Repeat("x", buf-1) + "\n", 100, []string{strings.Repeat("x", buf-1) + "\n"}},
		{"many buffers", strings.Repeat("y", 10*buf+3) + "\nz\n", 1000, []string{strings.Repeat("y", 10*buf+3) + "\n", "z\n"}},
		{"at max", strings.Repeat("m", 40) + "\n", 40, []string{strings.Repeat("m", 40) + "\n"}},
		{"too long, then the next", strings.Repeat("l", 41) + "\nok\n", 40, []string{"!", "ok\n"}},
		{"unterminated last", "a\n" + strings.Repeat("u", 3*buf), 1000, []string{"a\n", strings.Repeat("u", 3*buf)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), buf)
			for i, want := range tc.want {
				line, err := readLine(br, tc.max)
				switch {
				case want == "!":
					if !errors.Is(err, errLineTooLong) {
						t.Fatalf("line %d: %q, %v; want errLineTooLong", i, line, err)
					}
				case err != nil || string(line) != want:
					t.Fatalf("line %d: %q, %v; want %q", i, line, err, want)
				case cap(line) != len(line):
					t.Errorf("line %d: capacity %d for %d bytes", i, cap(line), len(line))
				}
			}
			if line, err := readLine(br, tc.max); err != io.EOF {
				t.Errorf("after the lines: %q, %v; want io.EOF", line, err)
			}
		})
	}
}

// BenchmarkReadLineBig reads a 1 MiB line, a large tool result from a
// stdio upstream, through the 64 KiB reader readStdout uses.
func BenchmarkReadLineBig(b *testing.B) {
	in := strings.Repeat("r", 1<<20) + "\n"
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if line, err := readLine(bufio.NewReaderSize(strings.NewReader(in), 64<<10), 2<<20); err != nil || len(line) != len(in) {
			b.Fatal(len(line), err)
		}
	}
}

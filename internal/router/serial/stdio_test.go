package serial

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 100)
	input := "a\r\n\n" + long + "\nb\n" + long[:10] + "\nlast"
	br := bufio.NewReaderSize(strings.NewReader(input), 16) // lines span buffer refills
	type got struct {
		line    string
		tooLong bool
	}
	var lines []got
	for {
		b, tooLong, err := readLine(br, 20)
		if len(b) > 0 || tooLong {
			lines = append(lines, got{string(b), tooLong})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []got{{"a\r\n", false}, {"\n", false}, {"", true}, {"b\n", false}, {long[:10] + "\n", false}, {"last", false}}
	if len(lines) != len(want) {
		t.Fatalf("lines = %+v, want %+v", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, lines[i], want[i])
		}
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`: `{"a":1}`,
		"{\n  \"a\": \"x\\ny\",\r\n  \"b\": [1, 2]\n}": `{"a":"x\ny","b":[1,2]}`,
		"{\"a\":\n":                    `{"a": `, // not JSON: line breaks become spaces
		"{\"s\":\"<b>\\u2028</b>\"\n}": `{"s":"<b>\u2028</b>"}`,
	} {
		if got := string(oneLine([]byte(in))); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

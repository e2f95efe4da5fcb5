package toolsearch

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokens splits text into search terms: runs of letters and digits, split
// again at snake_case, kebab-case, dotted and camelCase boundaries
// (getFileInfo → get file info getfileinfo), lower-cased, without common
// English stop words, and with simple plurals reduced to their singular
// (issues → issue, repositories → repository, branches → branch), so that
// "list the issues" meets list_issues and "create an issue" create_issue.
func Tokens(text string) []string {
	return appendTokens(nil, text)
}

func appendTokens(out []string, text string) []string {
	start := -1
	for i, r := range text {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = appendWord(out, text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = appendWord(out, text[start:])
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// appendWord splits one run of letters and digits at case changes; a run
// that splits is also kept whole (GitHub is github, git and hub), so that
// a query writing it either way matches.
func appendWord(out []string, w string) []string {
	n := len(out)
	out = splitCase(out, w)
	if len(out)-n > 1 {
		out = appendTerm(out, w)
	}
	return out
}

func splitCase(out []string, w string) []string {
	start := 0
	prev := rune(-1)
	for i, r := range w {
		if i > start && unicode.IsUpper(r) {
			next, _ := utf8.DecodeRuneInString(w[i+utf8.RuneLen(r):])
			// fooBar | HTTPServer: HTTP|Server (an upper before a lower
			// starts a word after a run of uppers).
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && unicode.IsLower(next)) {
				out = appendTerm(out, w[start:i])
				start = i
			}
		}
		prev = r
	}
	return appendTerm(out, w[start:])
}

func appendTerm(out []string, t string) []string {
	t = strings.ToLower(t)
	if stopWords[t] {
		return out
	}
	return append(out, Stem(t))
}

// Stem reduces a lower-case English plural to its singular with a few
// suffix rules; other words are returned as they are. It is deliberately
// simple: exact enough for tool names and descriptions, and the same rule
// applies to the query, so a miss only costs a match, never a wrong one.
func Stem(t string) string {
	n := len(t)
	switch {
	case n <= 3 || t[n-1] != 's' || noStem[t]:
		return t
	case strings.HasSuffix(t, "ies") && n > 4:
		return t[:n-3] + "y" // repositories, entries
	case strings.HasSuffix(t, "sses"), strings.HasSuffix(t, "shes"), strings.HasSuffix(t, "ches"), strings.HasSuffix(t, "xes"), strings.HasSuffix(t, "zzes"):
		return t[:n-2] // addresses, pushes, branches, indexes
	case strings.HasSuffix(t, "ss"), strings.HasSuffix(t, "us"), strings.HasSuffix(t, "is"):
		return t // access, status, analysis
	}
	return t[:n-1]
}

// noStem are words ending in s that are not plurals.
var noStem = map[string]bool{"this": true, "has": true, "was": true, "does": true, "always": true, "alias": true, "canvas": true, "https": true, "news": true, "series": true, "species": true, "ops": true, "aws": true, "dns": true, "gcs": true, "k8s": true, "sms": true, "css": true, "yes": true, "less": true, "unless": true, "its": true, "plus": true, "bus": true, "gis": true}

// stopWords carry no meaning for finding a tool.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true, "on": true, "for": true,
	"with": true, "by": true, "at": true, "from": true, "into": true, "as": true, "is": true, "are": true, "be": true, "it": true,
	"this": true, "that": true, "these": true, "those": true, "i": true, "me": true, "my": true, "we": true, "our": true, "you": true,
	"your": true, "can": true, "will": true, "would": true, "should": true, "please": true, "want": true, "need": true, "some": true,
	"any": true, "all": true, "do": true, "does": true, "how": true, "what": true, "which": true, "who": true, "its": true, "if": true,
	"then": true, "there": true, "their": true, "them": true, "so": true, "such": true, "via": true, "using": true, "use": true,
	"tool": true, "tools": true, "given": true, "specified": true, "optional": true, "e": true, "g": true, "eg": true, "etc": true,
}

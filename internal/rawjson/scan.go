package rawjson

// Member is one member of an object as Scan saw it: its decoded key and
// the offsets, in the object's text, of its key (the opening quote) and of
// its value.
type Member struct {
	Key                  string
	KeyStart, Start, End int
}

// Scan calls top with each top-level member of obj and, when the member
// named into holds an object, inner with each of that object's members
// (offsets in that object's text): a reader that needs a request's params
// and its _meta reads them with one call, and hands what it found down
// instead of asking again. It stops at the first syntax error.
func Scan(obj []byte, into string, top, inner func(Member)) error {
	var nested []byte
	var bad error
	err := eachRawField(obj, func(raw []byte, at, vStart, vEnd int) bool {
		key, ok := unquote(raw)
		if !ok {
			bad = syntaxErr(at, "bad key")
			return false
		}
		top(Member{Key: key, KeyStart: at, Start: vStart, End: vEnd})
		if key == into && nested == nil && vEnd > vStart && obj[vStart] == '{' {
			nested = obj[vStart:vEnd]
		}
		return true
	})
	if bad != nil {
		return bad
	}
	if err != nil || nested == nil {
		return err
	}
	return eachRawFieldQuiet(nested, func(raw []byte, at, vStart, vEnd int) bool {
		key, ok := unquote(raw)
		if !ok {
			bad = syntaxErr(at, "bad key")
			return false
		}
		inner(Member{Key: key, KeyStart: at, Start: vStart, End: vEnd})
		return true
	})
}

// String decodes raw, a member's raw value, as GetString does: false when
// it is not a string.
func String(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw)
}

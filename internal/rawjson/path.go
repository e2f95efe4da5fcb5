package rawjson

import "errors"

// ErrNoPath is returned by GetPath when a member on the path is missing.
var ErrNoPath = errors.New("rawjson: member missing")

// ErrNotString is returned by GetPath when the last member is not a string.
var ErrNotString = errors.New("rawjson: not a string")

// Lookup returns the raw value at the end of path, a chain of member names
// from obj; false when a member on the way is missing (an empty path is
// obj itself).
func Lookup(obj []byte, path []string) ([]byte, bool) {
	for _, k := range path {
		next, ok := Get(obj, k)
		if !ok {
			return nil, false
		}
		obj = next
	}
	return obj, true
}

// GetPath returns the string at the end of path, a chain of member names
// from obj ("ref", "uri" for params.ref.uri).
func GetPath(obj []byte, path []string) (string, error) {
	if len(path) == 0 {
		return "", ErrNoPath
	}
	obj, ok := Lookup(obj, path[:len(path)-1])
	if !ok {
		return "", ErrNoPath
	}
	s, ok := GetString(obj, path[len(path)-1])
	if !ok {
		return "", ErrNotString
	}
	return s, nil
}

// SetPath sets the string at the end of path, editing only the bytes of
// the members on it.
func SetPath(obj []byte, path []string, value string) ([]byte, error) {
	if len(path) == 0 {
		return nil, ErrNoPath
	}
	if len(path) == 1 {
		return SetString(obj, path[0], value)
	}
	inner, ok := Get(obj, path[0])
	if !ok {
		return nil, ErrNoPath
	}
	inner, err := SetPath(inner, path[1:], value)
	if err != nil {
		return nil, err
	}
	return Set(obj, path[0], inner)
}

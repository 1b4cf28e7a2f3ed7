package sessions

import "strings"

// keyParts is how many parts a conversation key has:
// channel:workspace:chat:thread.
const keyParts = 4

// ShownKey is a conversation key as an operator reads it (in logs, the
// admin console): without the separators of its empty trailing parts, so
// that a console conversation, "console::f0804e6bda20:", reads
// "console::f0804e6bda20". The key in Redis stays as it is. A key whose
// parts hold a separator of their own is shown whole, so that KeyOf
// always finds the key again.
func ShownKey(key string) string {
	if strings.Count(key, ":") != keyParts-1 {
		return key
	}
	return strings.TrimRight(key, ":")
}

// KeyOf is the conversation key an operator named, in either form: the
// key itself, or as ShownKey shows it.
func KeyOf(shown string) string {
	if n := strings.Count(shown, ":"); shown != "" && n < keyParts-1 {
		return shown + strings.Repeat(":", keyParts-1-n)
	}
	return shown
}

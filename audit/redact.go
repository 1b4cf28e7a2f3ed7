package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The preview of a call's arguments is for a person reading the ledger:
// enough to tell one call from another, never a copy. It is bounded, and
// whatever looks like a secret is replaced before it is cut.
const (
	// MaxPreview is the most runes of a preview.
	MaxPreview = 240
	// maxParse is the most bytes of arguments read for the preview: a
	// huge argument is previewed from its start and hashed whole.
	maxParse = 16 << 10
	// maxField bounds every other text of an entry.
	maxField = 200
	// redacted replaces a secret.
	redacted = "[redacted]"
)

// The patterns are compiled when the first text is redacted, not at
// start-up: a bounded repetition compiles to an instruction a repeat, and
// a process that never audits a tool call needs none of them.
var patterns = sync.OnceValue(func() redactPatterns {
	return redactPatterns{
		secretKey: regexp.MustCompile(`(?i)(pass(word|wd|phrase)?|secret|token|api[-_]?key|apikey|access[-_]?key|private[-_]?key|auth(orization)?|credential|cookie|session|signature|^key$|[-_]key$)`),
		secretText: []*regexp.Regexp{
			regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`),
			regexp.MustCompile(`(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}`),
			regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`),
			regexp.MustCompile(`\b(xox[abposr]|xapp)-[A-Za-z0-9-]{8,}`),
			regexp.MustCompile(`\b(sk|pk|rk)[-_](live[-_]|test[-_]|proj[-_])?[A-Za-z0-9_-]{16,}`),
			regexp.MustCompile(`\b(gh[pousr]|github_pat)_[A-Za-z0-9_]{16,}`),
			regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{16,}`),
			regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`),
			regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`),
			regexp.MustCompile(`(?i)([?&;\s"']|^)((pass(word|wd)?|secret|token|api[-_]?key|access[-_]?token|auth|key|sig|signature)=)[^&\s"']+`),
			regexp.MustCompile(`(://[^/\s:@]+:)[^@\s/]+@`),
		},
		longRun: regexp.MustCompile(`[A-Za-z0-9+=_-]{32,}`),
	}
})

// redactPatterns are what redaction looks for.
type redactPatterns struct {
	// secretKey matches the names of fields whose values are secrets,
	// whatever they hold: "password", "api_key", "X-Auth-Token",
	// "clientSecret".
	secretKey *regexp.Regexp
	// secretText matches secrets that announce themselves inside any
	// text: the token formats of common services, bearer credentials,
	// PEM keys, JWTs, key=value pairs of URLs and forms, and passwords in
	// URLs.
	secretText []*regexp.Regexp
	// longRun is a long unbroken run of letters and digits: with both in
	// it, more likely a key than a word (an id of a few dozen hex digits
	// goes too, which is the right side to err on). A slash ends a run,
	// so a path stays readable.
	longRun *regexp.Regexp
}

// HashArgs is the hex SHA-256 of a call's arguments as the model sent
// them: what ties a ledger entry to the call without keeping it.
func HashArgs(args string) string {
	sum := sha256.Sum256([]byte(args))
	return hex.EncodeToString(sum[:])
}

// Preview is the redacted, bounded preview of a call's arguments: a JSON
// object's fields with the values of secret-named fields replaced, and
// every text cleared of what looks like a secret.
func Preview(args string) string {
	if len(args) > maxParse {
		return clip(RedactText(clipBytes(args, maxParse)), MaxPreview)
	}
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return clip(RedactText(args), MaxPreview)
	}
	var b strings.Builder
	writeRedacted(&b, v)
	return clip(b.String(), MaxPreview)
}

// writeRedacted writes v as compact JSON with sorted keys, secrets
// replaced.
func writeRedacted(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(mapKeys(v)) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, RedactText(k))
			b.WriteByte(':')
			if patterns().secretKey.MatchString(k) {
				writeString(b, redacted)
				continue
			}
			writeRedacted(b, v[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeRedacted(b, e)
		}
		b.WriteByte(']')
	case string:
		writeString(b, RedactText(v))
	default:
		data, _ := json.Marshal(v)
		b.Write(data)
	}
}

// writeString writes s as a JSON string, leaving <, > and & as they are:
// the preview is read as text, and escaped it would read worse.
func writeString(b *strings.Builder, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	// Encode ends with a newline.
	str := b.String()
	b.Reset()
	b.WriteString(strings.TrimSuffix(str, "\n"))
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// RedactText replaces whatever in s looks like a token, key or password.
func RedactText(s string) string {
	p := patterns()
	for _, re := range p.secretText {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			// Keep what names the secret (a "token=", a URL's user) so
			// the preview still reads; never the secret itself.
			switch {
			case len(sub) > 2 && strings.HasSuffix(sub[2], "="):
				return sub[1] + sub[2] + redacted
			case len(sub) > 1 && strings.HasPrefix(sub[1], "://"):
				return sub[1] + redacted + "@"
			}
			return redacted
		})
	}
	return p.longRun.ReplaceAllStringFunc(s, func(m string) string {
		if strings.ContainsAny(m, "0123456789") && strings.ContainsFunc(m, unicode.IsLetter) {
			return redacted
		}
		return m
	})
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// clipBytes cuts s to at most n bytes on a rune boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// field bounds a text of an entry other than the preview: ids and names
// Parley or a platform made, which come from users and platforms all the
// same.
func field(s string) string {
	return clip(strings.ToValidUTF8(s, "\uFFFD"), maxField)
}

package skills

import "strings"

// MaxNameLen is the longest valid skill name, from the Agent Skills spec.
const MaxNameLen = 64

// ValidName reports whether name is a valid skill identity: 1–64 characters
// of a–z, 0–9 and single hyphens, not starting or ending with a hyphen.
// Such a name is safe as a single path element and in prompts.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	prevHyphen := true // forbids a leading hyphen
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			prevHyphen = false
		case c == '-':
			if prevHyphen {
				return false
			}
			prevHyphen = true
		default:
			return false
		}
	}
	return !prevHyphen
}

// normaliseName repairs the two slips that most often make a name invalid:
// underscores (my_skill → my-skill) and hyphens at either end (-draft →
// draft). It does nothing else, so a name that needs more stays invalid
// and its skill is reported instead of guessed at.
func normaliseName(name string) string {
	return strings.Trim(strings.ReplaceAll(name, "_", "-"), "-")
}

package feishu

import "strings"

// callMethod is the method label of parley_platform_calls_total for a
// request to the Open API: its path below /open-apis/ with every segment
// that names a thing (a message, a chat, a card: om_…, oc_…, numbers)
// written :id, as im/v1/messages/:id/reply or
// cardkit/v1/cards/:id/elements/answer/content. The label's values are so
// bounded by the paths Parley calls, whatever the ids.
func callMethod(path string) string {
	rest, ok := strings.CutPrefix(path, "/open-apis/")
	if !ok {
		i := strings.Index(path, "/open-apis/")
		if i < 0 {
			return "other"
		}
		rest = path[i+len("/open-apis/"):]
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if len(parts) > 8 {
		return "other"
	}
	for i, p := range parts {
		if !isPathWord(p) {
			parts[i] = ":id"
		}
	}
	return strings.Join(parts, "/")
}

// isPathWord reports whether a path segment is a word of the API (a
// resource, an action, a version like v1, an element id of Parley's own
// cards) rather than a platform id: no digits outside a version, and not
// one of the prefixes Feishu's ids carry (om_ a message, oc_ a chat, ou_
// and on_ a user, img_ and file_ a resource).
func isPathWord(p string) bool {
	if p == "" || len(p) > 40 {
		return false
	}
	if len(p) >= 2 && p[0] == 'v' && strings.Trim(p[1:], "0123456789") == "" {
		return true
	}
	for _, prefix := range idPrefixes {
		if strings.HasPrefix(p, prefix) {
			return false
		}
	}
	for _, c := range p {
		if c != '_' && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

var idPrefixes = []string{"om_", "oc_", "ou_", "on_", "img_", "file_"}

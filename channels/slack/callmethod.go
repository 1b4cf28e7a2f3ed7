package slack

import (
	"net/http"
	"strings"
)

// callMethod is the method label of parley_platform_calls_total for a
// request to Slack: the Web API method its path names (chat.postMessage),
// or file_upload / file_download for the file hosts' URLs. Anything else
// is "other", so that no URL can grow the label's values.
func callMethod(r *http.Request) string {
	p := r.URL.Path
	if i := strings.LastIndex(p, "/api/"); i >= 0 {
		if m := p[i+len("/api/"):]; isMethodName(m) {
			return m
		}
		return "other"
	}
	if r.Method == http.MethodGet {
		return "file_download"
	}
	return "file_upload"
}

// isMethodName reports whether m reads like a Web API method: letters
// and dots, at most 64 of them.
func isMethodName(m string) bool {
	if m == "" || len(m) > 64 {
		return false
	}
	for _, c := range m {
		if c != '.' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

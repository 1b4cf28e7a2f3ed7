package slack

import (
	"net/http/httptest"
	"testing"
)

func TestCallMethodNamesTheWebAPIMethod(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"POST", "https://slack.com/api/chat.postMessage", "chat.postMessage"},
		{"POST", "http://127.0.0.1:9/base/api/assistant.threads.setStatus", "assistant.threads.setStatus"},
		{"POST", "https://slack.com/api/chat.post%3Cscript%3E", "other"},
		{"GET", "https://files.slack.com/files-pri/T1-F1/a.png", "file_download"},
		{"POST", "https://files.slack.com/upload/v1/abc", "file_upload"},
	} {
		if got := callMethod(httptest.NewRequest(c.method, c.url, nil)); got != c.want {
			t.Errorf("callMethod(%s %s) = %q, want %q", c.method, c.url, got, c.want)
		}
	}
}

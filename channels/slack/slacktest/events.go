package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Event builds an event_callback payload around an inner event.
func Event(eventID string, inner map[string]any) map[string]any {
	return map[string]any{
		"token": "legacy-verification-token", "team_id": TeamID, "api_app_id": "A0PARLEY",
		"type": "event_callback", "event_id": eventID, "event_time": time.Now().Unix(), "event": inner,
		"authorizations": []map[string]any{{"team_id": TeamID, "user_id": BotUserID, "is_bot": true}},
	}
}

// Mention is an app_mention of the bot; thread is "" for a top-level one.
func Mention(channel, user, ts, thread, text string) map[string]any {
	e := map[string]any{"type": "app_mention", "user": user, "text": "<@" + BotUserID + "> " + text, "ts": ts,
		"channel": channel, "event_ts": ts}
	if thread != "" {
		e["thread_ts"] = thread
	}
	return e
}

// Message is a message event; channelType is im, channel, group or mpim.
func Message(channel, channelType, user, ts, thread, text string) map[string]any {
	e := map[string]any{"type": "message", "user": user, "text": text, "ts": ts, "channel": channel,
		"channel_type": channelType, "event_ts": ts, "client_msg_id": "m-" + ts}
	if thread != "" {
		e["thread_ts"] = thread
	}
	return e
}

// Signed builds a request to url carrying body, signed with secret at
// time at.
func Signed(t testing.TB, url, secret string, at time.Time, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sign(secret, ts, body))
	if strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req
}

// Do sends req and returns the status and body.
func Do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sign is Slack's v0 signature, written independently of the adapter's so
// that tests check one against the other.
func sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

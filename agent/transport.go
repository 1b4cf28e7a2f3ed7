package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// maxRetryAfter caps the wait a server may ask for, so that one bad header
// cannot park a conversation for minutes.
const maxRetryAfter = 30 * time.Second

// maxResponseBytes bounds the body of a model response that is read: an
// answer of the default model.max_tokens is a few tens of kilobytes, and
// a server must not make Parley hold (or wait for) more.
const maxResponseBytes = 4 << 20

// maxStreamBytes bounds the wire bytes of a streamed answer. A stream sends
// each token in an event of its own, with a hundred or more bytes of
// framing around a few bytes of text, so its wire size says little about
// the answer's: the answer itself (text, refusal and tool arguments) is
// held to maxResponseBytes as it is assembled, and this only stops a
// server that sends framing without end.
const maxStreamBytes = 16 * maxResponseBytes

// errResponseTooLarge is a response body past maxResponseBytes. It is not
// retried: a server that sent one will send another, and each costs.
var errResponseTooLarge = fmt.Errorf("agent: model response larger than %d bytes", maxResponseBytes)

// limitedReader is io.LimitReader that fails with errResponseTooLarge
// instead of ending quietly, so that a cut body is not mistaken for a
// malformed one.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// Client sends chat completion requests to an OpenAI-compatible endpoint.
// The Agent writes the request bodies itself (see wire.go) and reads the
// answers into go-openai's response types.
type Client struct {
	url  string // …/chat/completions
	auth string // Authorization header
	http *http.Client
}

// NewClient returns a client for baseURL (empty: the OpenAI API) and
// apiKey. httpClient may be nil (http.DefaultClient); it is used as it
// is, never modified.
func NewClient(baseURL, apiKey string, httpClient *http.Client) *Client {
	if baseURL == "" {
		baseURL = openai.DefaultConfig("").BaseURL
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{url: strings.TrimRight(baseURL, "/") + "/chat/completions", auth: "Bearer " + apiKey, http: httpClient}
}

// errorReplyBytes bounds what is read of an error response.
const errorReplyBytes = 64 << 10

// send posts one request body and decodes the answer. A failure carries
// the status in go-openai's error types (*openai.APIError when the body is
// the API's error object, *openai.RequestError otherwise); after is the
// Retry-After of the response, if it had one.
func (c *Client) send(ctx context.Context, body []byte) (resp openai.ChatCompletionResponse, after time.Duration, err error) {
	hr, after, err := c.post(ctx, func() io.Reader { return bytes.NewReader(body) }, int64(len(body)), "application/json")
	if err != nil {
		return resp, after, err
	}
	defer hr.Body.Close()
	resp, err = decodeAnswer(&limitedReader{r: hr.Body, left: maxResponseBytes})
	return resp, after, err
}

// wholeAnswer is what Parley reads of a chat completion answered whole:
// the choices' messages and finish reasons, and the usage. Decoding only
// these, into plain fields, costs a fraction of go-openai's response type,
// which decodes every message through a method of its own (a second scan
// of it, and a third when its content is not a string) and fills fields
// Parley never reads. Content is read in every shape servers send (see
// content); an error object in place of the choices is the server's
// failure.
type wholeAnswer struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role             string            `json:"role"`
			Content          content           `json:"content"`
			Refusal          string            `json:"refusal"`
			ReasoningContent string            `json:"reasoning_content"`
			ToolCalls        []openai.ToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason openai.FinishReason `json:"finish_reason"`
	} `json:"choices"`
	Usage openai.Usage `json:"usage"`
	Error *wireError   `json:"error"`
}

// decodeAnswer reads a chat completion answered whole from r. An answer
// the lean wholeAnswer cannot hold (a value of another type) is decoded
// into go-openai's response type as it always was, which accepts what that
// accepts and fails as that fails.
func decodeAnswer(r io.Reader) (openai.ChatCompletionResponse, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return openai.ChatCompletionResponse{}, fmt.Errorf("decode the answer: %w", err)
	}
	var lean wholeAnswer
	if json.Unmarshal(body, &lean) == nil {
		if len(lean.Choices) == 0 && lean.Error != nil && lean.Error.e != nil {
			return openai.ChatCompletionResponse{}, lean.Error.e
		}
		resp := openai.ChatCompletionResponse{Usage: lean.Usage}
		if len(lean.Choices) > 0 {
			resp.Choices = make([]openai.ChatCompletionChoice, len(lean.Choices))
			for i, c := range lean.Choices {
				resp.Choices[i] = openai.ChatCompletionChoice{Index: c.Index, FinishReason: c.FinishReason, Message: openai.ChatCompletionMessage{
					Role: c.Message.Role, Content: c.Message.Content.text, Refusal: c.Message.Refusal,
					ReasoningContent: c.Message.ReasoningContent, ToolCalls: c.Message.ToolCalls}}
			}
		}
		return resp, nil
	}
	var resp openai.ChatCompletionResponse
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&resp); err != nil {
		return resp, fmt.Errorf("decode the answer: %w", err)
	}
	return resp, nil
}

// post sends the request body of n bytes that body gives, and returns a
// successful response for the caller to read and close; a failed one is
// read into an error (see send). body may be called again, for the
// transport to resend a request a stale connection lost.
func (c *Client) post(ctx context.Context, body func() io.Reader, n int64, accept string) (*http.Response, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, body())
	if err != nil {
		return nil, 0, err
	}
	req.ContentLength = n
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body()), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", c.auth)
	hr, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	after, _ := parseRetryAfter(hr.Header.Get("Retry-After"), time.Now())
	if hr.StatusCode < 200 || hr.StatusCode >= 400 {
		defer hr.Body.Close()
		return nil, after, statusError(hr)
	}
	if err := checkMediaType(hr.Header.Get("Content-Type")); err != nil {
		hr.Body.Close()
		return nil, after, err
	}
	return hr, after, nil
}

// ErrNotAnAPI marks a successful response that is a web page, not an
// answer of the API: the base URL names a site (a proxy's sign-in page, a
// front end, a path without /v1), which no retry fixes.
var ErrNotAnAPI = errors.New("not an OpenAI-compatible API")

// checkMediaType refuses a response whose Content-Type says it is HTML.
// Anything else is left to the decoder: servers label JSON and event
// streams loosely (text/plain, none at all), and their answers still read.
func checkMediaType(contentType string) error {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != "text/html" && mt != "application/xhtml+xml") {
		return nil
	}
	return fmt.Errorf("%w: the response was %s, not JSON: check model.base_url", ErrNotAnAPI, mt)
}

// statusError reads a failed response into go-openai's error types, as
// its client would.
func statusError(hr *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(hr.Body, errorReplyBytes))
	if err != nil {
		return &openai.RequestError{HTTPStatus: hr.Status, HTTPStatusCode: hr.StatusCode, Err: err}
	}
	var e openai.ErrorResponse
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		if err == nil {
			err = errors.New("no error object in the response")
		}
		return &openai.RequestError{HTTPStatus: hr.Status, HTTPStatusCode: hr.StatusCode, Err: err, Body: body}
	}
	e.Error.HTTPStatus, e.Error.HTTPStatusCode = hr.Status, hr.StatusCode
	return e.Error
}

// parseRetryAfter reads a Retry-After value, either delay-seconds or an
// HTTP date, capped at maxRetryAfter. A date in the past means "now".
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs != secs { // negative or NaN
			return 0, false
		}
		if secs > maxRetryAfter.Seconds() {
			return maxRetryAfter, true
		}
		d = time.Duration(secs * float64(time.Second))
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}

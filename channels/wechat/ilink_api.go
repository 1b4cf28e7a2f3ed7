package wechat

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// iLink protocol constants (Tencent/openclaw-weixin docs/protocol.md).
const (
	// DefaultILinkBaseURL is the iLink API host.
	DefaultILinkBaseURL = "https://ilinkai.weixin.qq.com"

	ilinkAppID        = "bot"
	ilinkBotType      = "3"
	ilinkClientMajor  = 1
	ilinkClientMinor  = 0
	ilinkClientPatch  = 0
	ilinkBotAgent     = "Parley"
	ilinkChannelVer   = "1.0.0"
	ilinkMsgUser      = 1
	ilinkMsgBot       = 2
	ilinkStateFinish  = 2
	ilinkItemText     = 1
	ilinkItemImage    = 2
	ilinkItemVoice    = 3
	ilinkItemFile     = 4
	ilinkItemVideo    = 5
	ilinkTypingOn     = 1
	ilinkTypingOff    = 2
	ilinkErrExpired   = -14
	ilinkRetStaleCtx  = -2
	maxILinkBody      = 8 << 20
	defaultLongPollMS = 35000
)

// ilinkClientVersion is (major<<16 | minor<<8 | patch) in decimal.
var ilinkClientVersion = strconv.Itoa(ilinkClientMajor<<16 | ilinkClientMinor<<8 | ilinkClientPatch)

// apiError is a non-zero ret or errcode in an iLink answer.
type apiError struct {
	Op      string
	Ret     int
	ErrCode int
	ErrMsg  string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("ilink %s: ret %d errcode %d: %s", e.Op, e.Ret, e.ErrCode, e.ErrMsg)
}

// Code is the label value for ChannelAPIErrors: errcode when set, else ret.
func (e *apiError) Code() string {
	if e.ErrCode != 0 {
		return strconv.Itoa(e.ErrCode)
	}
	return strconv.Itoa(e.Ret)
}

// httpError is a transport-level failure (status, network, bad body).
type httpError struct {
	Op     string
	Status int
	Err    error
}

func (e *httpError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("ilink %s: HTTP %d", e.Op, e.Status)
	}
	return fmt.Sprintf("ilink %s: %v", e.Op, e.Err)
}

func (e *httpError) Unwrap() error { return e.Err }

// Code is the label value for ChannelAPIErrors.
func (e *httpError) Code() string {
	if e.Status != 0 {
		return "http_" + strconv.Itoa(e.Status)
	}
	if errors.Is(e.Err, errBadBody) {
		return "bad_body"
	}
	return "network"
}

var errBadBody = errors.New("malformed JSON body")

// errorCode is the metrics label of any error of this file.
func errorCode(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code()
	}
	var he *httpError
	if errors.As(err, &he) {
		return he.Code()
	}
	return "error"
}

// ilinkClient calls one iLink base URL, with a bot token or without.
type ilinkClient struct {
	http    *http.Client
	baseURL string
	token   string
	// calls, when set, counts each request by its op (a bot's calls;
	// the operator's login is not counted).
	calls func(op string)
}

type baseInfo struct {
	ChannelVersion string `json:"channel_version"`
	BotAgent       string `json:"bot_agent"`
}

var defaultBaseInfo = baseInfo{ChannelVersion: ilinkChannelVer, BotAgent: ilinkBotAgent}

// wechatUIN is base64 of the decimal string of a random uint32.
func wechatUIN() string {
	return base64.StdEncoding.EncodeToString([]byte(strconv.FormatUint(uint64(rand.Uint32()), 10)))
}

func (c *ilinkClient) headers(h http.Header) {
	h.Set("AuthorizationType", "ilink_bot_token")
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	h.Set("X-WECHAT-UIN", wechatUIN())
	h.Set("iLink-App-Id", ilinkAppID)
	h.Set("iLink-App-ClientVersion", ilinkClientVersion)
}

// do sends one request and decodes the JSON answer into out. A non-zero
// ret or errcode in the answer is returned as *apiError after out is
// filled.
func (c *ilinkClient) do(ctx context.Context, method, path string, in, out any) error {
	op := strings.TrimPrefix(path, "/ilink/bot/")
	if i := strings.IndexByte(op, '?'); i >= 0 {
		op = op[:i]
	}
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.baseURL, "/")+path, body)
	if err != nil {
		return &httpError{Op: op, Err: err}
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.headers(req.Header)
	if c.calls != nil {
		c.calls(op)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &httpError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxILinkBody))
	if err != nil {
		return &httpError{Op: op, Err: err}
	}
	if resp.StatusCode/100 != 2 {
		return &httpError{Op: op, Status: resp.StatusCode}
	}
	var status struct {
		Ret     int    `json:"ret"`
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(raw, &status); err != nil {
		return &httpError{Op: op, Err: fmt.Errorf("%w: %v", errBadBody, err)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return &httpError{Op: op, Err: fmt.Errorf("%w: %v", errBadBody, err)}
		}
	}
	if status.Ret != 0 || status.ErrCode != 0 {
		return &apiError{Op: op, Ret: status.Ret, ErrCode: status.ErrCode, ErrMsg: status.ErrMsg}
	}
	return nil
}

// --- login ---

type qrCodeResp struct {
	QRCode    string `json:"qrcode"`
	QRContent string `json:"qrcode_img_content"`
}

func (c *ilinkClient) getQRCode(ctx context.Context) (qrCodeResp, error) {
	var out qrCodeResp
	err := c.do(ctx, http.MethodPost, "/ilink/bot/get_bot_qrcode?bot_type="+ilinkBotType, map[string]any{"local_token_list": []string{}}, &out)
	return out, err
}

type qrStatusResp struct {
	Status       string `json:"status"`
	BotToken     string `json:"bot_token"`
	BotID        string `json:"ilink_bot_id"`
	BaseURL      string `json:"baseurl"`
	UserID       string `json:"ilink_user_id"`
	RedirectHost string `json:"redirect_host"`
}

func (c *ilinkClient) qrStatus(ctx context.Context, qrcode, verifyCode string) (qrStatusResp, error) {
	q := url.Values{"qrcode": {qrcode}}
	if verifyCode != "" {
		q.Set("verify_code", verifyCode)
	}
	var out qrStatusResp
	err := c.do(ctx, http.MethodGet, "/ilink/bot/get_qrcode_status?"+q.Encode(), nil, &out)
	return out, err
}

// --- receive ---

type messageItem struct {
	Type     int `json:"type"`
	TextItem *struct {
		Text string `json:"text"`
	} `json:"text_item,omitempty"`
	VoiceItem *struct {
		Text string `json:"text"`
	} `json:"voice_item,omitempty"`
}

// ilinkMessage is a WeixinMessage. message_id is a number on the wire;
// keeping it raw keeps large ids exact and accepts a string too.
type ilinkMessage struct {
	MessageID    json.RawMessage `json:"message_id"`
	FromUserID   string          `json:"from_user_id"`
	ToUserID     string          `json:"to_user_id"`
	CreateTimeMS int64           `json:"create_time_ms"`
	SessionID    string          `json:"session_id"`
	GroupID      string          `json:"group_id"`
	MessageType  int             `json:"message_type"`
	ItemList     []messageItem   `json:"item_list"`
	ContextToken string          `json:"context_token"`
}

// id returns message_id as text, or "" when it is missing.
func (m ilinkMessage) id() string {
	s := strings.TrimSpace(string(m.MessageID))
	if s == "" || s == "null" || s == "0" || s == `""` {
		return ""
	}
	return strings.Trim(s, `"`)
}

type updatesResp struct {
	Msgs          []json.RawMessage `json:"msgs"`
	Cursor        string            `json:"get_updates_buf"`
	LongPollingMS int               `json:"longpolling_timeout_ms"`
}

func (c *ilinkClient) getUpdates(ctx context.Context, cursor string) (updatesResp, error) {
	var out updatesResp
	err := c.do(ctx, http.MethodPost, "/ilink/bot/getupdates", map[string]any{"get_updates_buf": cursor, "base_info": defaultBaseInfo}, &out)
	return out, err
}

// --- send ---

type sendItem struct {
	Type     int               `json:"type"`
	TextItem map[string]string `json:"text_item"`
}

type sendMsg struct {
	FromUserID   string     `json:"from_user_id"`
	ToUserID     string     `json:"to_user_id"`
	ClientID     string     `json:"client_id"`
	MessageType  int        `json:"message_type"`
	MessageState int        `json:"message_state"`
	ItemList     []sendItem `json:"item_list"`
	ContextToken string     `json:"context_token,omitempty"`
}

func (c *ilinkClient) sendMessage(ctx context.Context, to, clientID, text, contextToken string) error {
	msg := sendMsg{
		ToUserID: to, ClientID: clientID, MessageType: ilinkMsgBot, MessageState: ilinkStateFinish,
		ItemList:     []sendItem{{Type: ilinkItemText, TextItem: map[string]string{"text": text}}},
		ContextToken: contextToken,
	}
	return c.do(ctx, http.MethodPost, "/ilink/bot/sendmessage", map[string]any{"msg": msg, "base_info": defaultBaseInfo}, nil)
}

func (c *ilinkClient) getTypingTicket(ctx context.Context, user, contextToken string) (string, error) {
	var out struct {
		Ticket string `json:"typing_ticket"`
	}
	err := c.do(ctx, http.MethodPost, "/ilink/bot/getconfig", map[string]any{"ilink_user_id": user, "context_token": contextToken, "base_info": defaultBaseInfo}, &out)
	return out.Ticket, err
}

func (c *ilinkClient) sendTyping(ctx context.Context, user, ticket string, status int) error {
	return c.do(ctx, http.MethodPost, "/ilink/bot/sendtyping", map[string]any{"ilink_user_id": user, "typing_ticket": ticket, "status": status, "base_info": defaultBaseInfo}, nil)
}

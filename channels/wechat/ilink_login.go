package wechat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/parleyhq/parley/retry"
)

// LoginOptions configures Login. Zero values take the defaults.
type LoginOptions struct {
	BaseURL string       // iLink host; default DefaultILinkBaseURL
	HTTP    *http.Client // default a client without a timeout (long polls)
	Out     io.Writer    // where the QR code and progress go
	// In answers the need_verifycode prompt (one line); nil refuses.
	In io.Reader
	// MaxCodes is how many QR codes one login may show before giving up
	// (a code lives about 5 minutes); default 3.
	MaxCodes int
	// PollInterval is the pause between status polls; default 1s.
	PollInterval time.Duration
	// StatusTimeout bounds one status long poll (~35 s server side);
	// default 40s. A timeout counts as "wait".
	StatusTimeout time.Duration
	// NoQR leaves out the terminal QR drawing (the link is still printed).
	NoQR bool
}

// ErrLoginExpired is returned when every QR code expired unscanned.
var ErrLoginExpired = errors.New("wechat: the QR code expired too many times; run `parley wechat login` again")

// Login runs the iLink QR login: it shows a code, follows its status
// (wait → scaned → confirmed), shows a new code when one expires (up to
// MaxCodes), asks for the verification code when WeChat wants one, and
// follows an IDC redirect. It returns the account to store.
func Login(ctx context.Context, o LoginOptions) (Account, error) {
	if o.BaseURL == "" {
		o.BaseURL = DefaultILinkBaseURL
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.MaxCodes <= 0 {
		o.MaxCodes = 3
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.StatusTimeout <= 0 {
		o.StatusTimeout = 40 * time.Second
	}
	var in *bufio.Reader
	if o.In != nil {
		in = bufio.NewReader(o.In)
	}
	home := &ilinkClient{http: o.HTTP, baseURL: o.BaseURL}

	newCode := func(n int) (string, error) {
		qr, err := home.getQRCode(ctx)
		if err != nil {
			return "", fmt.Errorf("wechat: get a login QR code from %s: %w", o.BaseURL, err)
		}
		if qr.QRCode == "" {
			return "", fmt.Errorf("wechat: %s returned no QR code", o.BaseURL)
		}
		link := qr.QRContent
		if link == "" {
			link = qr.QRCode
		}
		if n > 1 {
			fmt.Fprintf(o.Out, "\nThe code expired; here is a new one (%d of %d).\n", n, o.MaxCodes)
		}
		fmt.Fprintln(o.Out, "Scan this QR code with WeChat on your phone to log the bot in:")
		if !o.NoQR {
			if q, err := qrcode.New(link, qrcode.Low); err == nil {
				fmt.Fprint(o.Out, q.ToSmallString(false))
			}
		}
		fmt.Fprintf(o.Out, "If the code does not show or scan, open this link on the phone instead:\n%s\n", link)
		return qr.QRCode, nil
	}

	codes := 1
	code, err := newCode(codes)
	if err != nil {
		return Account{}, err
	}
	poll := home
	verify := ""
	scanned := false
	for {
		sctx, cancel := context.WithTimeout(ctx, o.StatusTimeout)
		st, err := poll.qrStatus(sctx, code, verify)
		cancel()
		verify = ""
		if ctx.Err() != nil {
			return Account{}, ctx.Err()
		}
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				return Account{}, fmt.Errorf("wechat: login refused: %w", err)
			}
			// A client timeout is an unchanged "wait"; a network error
			// or gateway timeout is retried.
			st = qrStatusResp{Status: "wait"}
		}
		switch st.Status {
		case "wait", "":
		case "scaned":
			if !scanned {
				fmt.Fprintln(o.Out, "Scanned. Confirm the login in WeChat on the phone…")
				scanned = true
			}
		case "confirmed":
			if st.BotToken == "" || st.BotID == "" {
				return Account{}, errors.New("wechat: login confirmed, but iLink sent no bot token or bot id; try again")
			}
			base := st.BaseURL
			if base == "" {
				base = poll.baseURL
			}
			fmt.Fprintf(o.Out, "Logged in: bot %s.\n", st.BotID)
			return Account{BotID: st.BotID, Token: st.BotToken, BaseURL: base, UserID: st.UserID, LoggedIn: time.Now().UTC()}, nil
		case "expired":
			codes++
			if codes > o.MaxCodes {
				return Account{}, ErrLoginExpired
			}
			if code, err = newCode(codes); err != nil {
				return Account{}, err
			}
			poll, scanned = home, false
		case "need_verifycode":
			if in == nil {
				return Account{}, errors.New("wechat: WeChat asks for a verification code, but there is no terminal to type it in; run the login interactively")
			}
			fmt.Fprint(o.Out, "WeChat shows a verification code on the phone. Type it here and press Enter: ")
			line, err := in.ReadString('\n')
			line = strings.TrimSpace(line)
			if line == "" {
				if err != nil {
					return Account{}, fmt.Errorf("wechat: no verification code entered: %w", err)
				}
				continue
			}
			verify = line
			continue // poll again at once with the code
		case "verify_code_blocked":
			return Account{}, errors.New("wechat: too many wrong verification codes; wait a while and run `parley wechat login` again")
		case "scaned_but_redirect":
			if st.RedirectHost != "" {
				next := redirectBase(poll.baseURL, st.RedirectHost)
				fmt.Fprintf(o.Out, "Continuing the login on %s…\n", next)
				poll = &ilinkClient{http: o.HTTP, baseURL: next}
			}
		case "binded_redirect":
			return Account{}, errors.New("wechat: this WeChat bot is already bound to a running instance; `parley wechat status` shows the stored login")
		default:
			fmt.Fprintf(o.Out, "(unexpected login status %q; still waiting)\n", st.Status)
		}
		if !retry.Sleep(ctx, o.PollInterval) {
			return Account{}, ctx.Err()
		}
	}
}

// redirectBase turns redirect_host into a base URL: a full URL is used as
// is, a bare host keeps the scheme of the current base (https in
// production).
func redirectBase(current, host string) string {
	if strings.Contains(host, "://") {
		return strings.TrimRight(host, "/")
	}
	scheme := "https"
	if u, err := url.Parse(current); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	}
	return scheme + "://" + strings.TrimRight(host, "/")
}

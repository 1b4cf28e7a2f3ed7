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
	l := &login{o: o.withDefaults()}
	l.home = &ilinkClient{http: l.o.HTTP, baseURL: l.o.BaseURL}
	l.poll = l.home
	if l.o.In != nil {
		l.in = bufio.NewReader(l.o.In)
	}
	if err := l.newCode(ctx); err != nil {
		return Account{}, err
	}
	for {
		st, err := l.status(ctx)
		if err != nil {
			return Account{}, err
		}
		acct, next, err := l.follow(ctx, st)
		switch {
		case err != nil:
			return Account{}, err
		case next == loginDone:
			return acct, nil
		case next == loginPollNow:
			continue
		}
		if !retry.Sleep(ctx, l.o.PollInterval) {
			return Account{}, ctx.Err()
		}
	}
}

// withDefaults returns o with its zero fields set to the defaults.
func (o LoginOptions) withDefaults() LoginOptions {
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
	return o
}

// login is one Login's state between status polls.
type login struct {
	o       LoginOptions
	in      *bufio.Reader // nil: no terminal to ask for a verification code
	home    *ilinkClient  // where codes come from
	poll    *ilinkClient  // where the status is asked: home, or an IDC redirect's host
	code    string        // the QR code shown
	codes   int           // how many codes were shown
	verify  string        // the verification code to send with the next poll
	scanned bool
}

// loginNext is what Login does after a status.
type loginNext int

const (
	loginPollLater loginNext = iota // poll again after PollInterval
	loginPollNow                    // poll again at once
	loginDone                       // the account is logged in
)

// newCode fetches a QR code and shows it.
func (l *login) newCode(ctx context.Context) error {
	l.codes++
	qr, err := l.home.getQRCode(ctx)
	if err != nil {
		return fmt.Errorf("wechat: get a login QR code from %s: %w", l.o.BaseURL, err)
	}
	if qr.QRCode == "" {
		return fmt.Errorf("wechat: %s returned no QR code", l.o.BaseURL)
	}
	link := qr.QRContent
	if link == "" {
		link = qr.QRCode
	}
	out := l.o.Out
	if l.codes > 1 {
		fmt.Fprintf(out, "\nThe code expired; here is a new one (%d of %d).\n", l.codes, l.o.MaxCodes)
	}
	fmt.Fprintln(out, "Scan this QR code with WeChat on your phone to log the bot in:")
	if !l.o.NoQR {
		if q, err := qrcode.New(link, qrcode.Low); err == nil {
			fmt.Fprint(out, q.ToSmallString(false))
		}
	}
	fmt.Fprintf(out, "If the code does not show or scan, open this link on the phone instead:\n%s\n", link)
	l.code = qr.QRCode
	return nil
}

// status asks the code's status once, sending the verification code if
// one was typed.
func (l *login) status(ctx context.Context) (qrStatusResp, error) {
	sctx, cancel := context.WithTimeout(ctx, l.o.StatusTimeout)
	st, err := l.poll.qrStatus(sctx, l.code, l.verify)
	cancel()
	l.verify = ""
	if ctx.Err() != nil {
		return qrStatusResp{}, ctx.Err()
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return qrStatusResp{}, fmt.Errorf("wechat: login refused: %w", err)
		}
		// A client timeout is an unchanged "wait"; a network error
		// or gateway timeout is retried.
		st = qrStatusResp{Status: "wait"}
	}
	return st, nil
}

// follow acts on one status.
func (l *login) follow(ctx context.Context, st qrStatusResp) (Account, loginNext, error) {
	switch st.Status {
	case "wait", "":
	case "scaned":
		if !l.scanned {
			fmt.Fprintln(l.o.Out, "Scanned. Confirm the login in WeChat on the phone…")
			l.scanned = true
		}
	case "confirmed":
		acct, err := l.confirmed(st)
		return acct, loginDone, err
	case "expired":
		if l.codes >= l.o.MaxCodes {
			return Account{}, loginDone, ErrLoginExpired
		}
		if err := l.newCode(ctx); err != nil {
			return Account{}, loginDone, err
		}
		l.poll, l.scanned = l.home, false
	case "need_verifycode":
		return Account{}, loginPollNow, l.askVerifyCode()
	case "verify_code_blocked":
		return Account{}, loginDone, errors.New("wechat: too many wrong verification codes; wait a while and run `parley wechat login` again")
	case "scaned_but_redirect":
		if st.RedirectHost != "" {
			next := redirectBase(l.poll.baseURL, st.RedirectHost)
			fmt.Fprintf(l.o.Out, "Continuing the login on %s…\n", next)
			l.poll = &ilinkClient{http: l.o.HTTP, baseURL: next}
		}
	case "binded_redirect":
		return Account{}, loginDone, errors.New("wechat: this WeChat bot is already bound to a running instance; `parley wechat status` shows the stored login")
	default:
		fmt.Fprintf(l.o.Out, "(unexpected login status %q; still waiting)\n", st.Status)
	}
	return Account{}, loginPollLater, nil
}

// confirmed returns the account a confirmed login names.
func (l *login) confirmed(st qrStatusResp) (Account, error) {
	if st.BotToken == "" || st.BotID == "" {
		return Account{}, errors.New("wechat: login confirmed, but iLink sent no bot token or bot id; try again")
	}
	base := st.BaseURL
	if base == "" {
		base = l.poll.baseURL
	}
	fmt.Fprintf(l.o.Out, "Logged in: bot %s.\n", st.BotID)
	return Account{BotID: st.BotID, Token: st.BotToken, BaseURL: base, UserID: st.UserID, LoggedIn: time.Now().UTC()}, nil
}

// askVerifyCode reads the verification code WeChat shows on the phone
// from the terminal, to send with the next poll; an empty line polls
// again without one.
func (l *login) askVerifyCode() error {
	if l.in == nil {
		return errors.New("wechat: WeChat asks for a verification code, but there is no terminal to type it in; run the login interactively")
	}
	fmt.Fprint(l.o.Out, "WeChat shows a verification code on the phone. Type it here and press Enter: ")
	line, err := l.in.ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "" && err != nil {
		return fmt.Errorf("wechat: no verification code entered: %w", err)
	}
	l.verify = line
	return nil
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

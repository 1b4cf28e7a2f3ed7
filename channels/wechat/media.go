package wechat

// Images and files from the WeCom AI bot and iLink: both send a download
// address with a key of the file's own, and the file encrypted under it
// (WeCom AES-256-CBC, iLink's CDN AES-128-ECB). The message carries the
// address and key as an Attachment; FetchAttachment downloads through the
// media client only from the platform's own media hosts (checked again on
// each redirect), never past the limit, and decrypts.

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/outbound"
)

// Meta keys of a WeChat attachment.
const (
	attachVia    = "via"    // ViaWeCom or ViaILink
	attachURL    = "url"    // WeCom: the file's address (signed, short-lived)
	attachAESKey = "aeskey" // WeCom: base64; iLink: base64 of the 16-byte key
	attachParam  = "param"  // iLink: encrypt_query_param of the CDN download
)

// Default media hosts.
const (
	// DefaultILinkCDNURL is iLink's CDN: GET {base}/download?encrypted_query_param=….
	DefaultILinkCDNURL = "https://novac2c.cdn.weixin.qq.com/c2c"
)

// errBadMedia is a download whose bytes do not decrypt: a corrupt file or
// a wrong key.
var errBadMedia = errors.New("wechat: the media does not decrypt (corrupt, or the wrong key)")

var _ channels.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements channels.AttachmentFetcher for both
// transports. The whole (encrypted) file is read, at most limit plus one
// cipher block of padding, then decrypted.
func (a *Adapter) FetchAttachment(ctx context.Context, m channels.Message, att channels.Attachment, limit int64) (io.ReadCloser, error) {
	var (
		u       *url.URL
		allowed func(*url.URL) bool // where a redirect may lead
		decrypt func([]byte) ([]byte, error)
		err     error
	)
	switch att.Meta[attachVia] {
	case ViaWeCom:
		u, err = a.wecomMediaURL(att.Meta[attachURL])
		if err != nil {
			return nil, err
		}
		allowed = func(r *url.URL) bool { _, err := a.wecomMediaURL(r.String()); return err == nil }
		key, kerr := wecomMediaKey(att.Meta[attachAESKey])
		if kerr != nil {
			return nil, kerr
		}
		decrypt = func(b []byte) ([]byte, error) { return decryptCBC(b, key) }
	case ViaILink:
		u, err = a.ilinkMediaURL(att.Meta[attachParam])
		if err != nil {
			return nil, err
		}
		allowed = func(r *url.URL) bool { return r.Scheme == u.Scheme && strings.EqualFold(r.Host, u.Host) }
		key, kerr := base64.StdEncoding.DecodeString(att.Meta[attachAESKey])
		if kerr != nil || len(key) != 16 {
			return nil, errors.New("wechat: iLink media: malformed key")
		}
		decrypt = func(b []byte) ([]byte, error) { return decryptECB(b, key) }
	default:
		return nil, fmt.Errorf("wechat: attachment of unknown transport %q", att.Meta[attachVia])
	}
	plain, err := a.download(ctx, u, allowed, limit, decrypt)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(plain)), nil
}

// download GETs u with the media client and decrypts the body. A
// redirect is followed only where allowed says (the platform's own media
// host). More than limit+aes.BlockSize*2 bytes of ciphertext (announced
// or read) is channels.ErrAttachmentTooLarge, and so is a plaintext over
// limit.
func (a *Adapter) download(ctx context.Context, u *url.URL, allowed func(*url.URL) bool, limit int64, decrypt func([]byte) ([]byte, error)) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("wechat: media request: %w", err)
	}
	client := *a.opts.MediaHTTP
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= maxMediaRedirects || !allowed(r.URL) {
			return fmt.Errorf("redirect to %q refused", r.URL.Host)
		}
		return nil
	}
	a.m.PlatformCalls.WithLabelValues(Name, "media_download").Inc()
	resp, err := client.Do(req)
	if err != nil {
		a.apiError("media_network")
		return nil, fmt.Errorf("wechat: media download from %s: %w", u.Host, redactURLError(err))
	}
	defer resp.Body.Close()
	if err := channels.HTTPStatusError(resp.StatusCode); err != nil {
		a.apiError("media_http_" + strconv.Itoa(resp.StatusCode/100) + "xx")
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("wechat: media download from %s: %w", u.Host, err)
	}
	// The padding adds at most two blocks (WeCom pads to 32 bytes).
	capBytes := limit
	if limit > 0 {
		capBytes = limit + 2*aes.BlockSize
		if resp.ContentLength > capBytes {
			return nil, fmt.Errorf("wechat: media of %d bytes: %w", resp.ContentLength, channels.ErrAttachmentTooLarge)
		}
	}
	body, err := io.ReadAll(channels.CapBody(resp.Body, capBytes))
	if err != nil {
		if errors.Is(err, channels.ErrAttachmentTooLarge) {
			return nil, fmt.Errorf("wechat: media: %w", err)
		}
		return nil, fmt.Errorf("wechat: media download from %s: %w", u.Host, err)
	}
	plain, err := decrypt(body)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(plain)) > limit {
		return nil, fmt.Errorf("wechat: media of %d bytes: %w", len(plain), channels.ErrAttachmentTooLarge)
	}
	return plain, nil
}

// redactURLError drops the URL from a client error: a media address is
// signed, and the signature is a credential for the file.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// wecomMediaKey decodes a WeCom media aeskey: base64 of 32 bytes, with or
// without its padding.
func wecomMediaKey(s string) ([]byte, error) {
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(key) != 32 {
		return nil, errors.New("wechat: WeCom media: malformed aeskey")
	}
	return key, nil
}

// decryptCBC is WeCom's media scheme: AES-256-CBC, the IV the key's first
// 16 bytes, PKCS#7 padding to a multiple of 32 bytes.
func decryptCBC(data, key []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("wechat: media key: %w", err)
	}
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, errBadMedia
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, key[:aes.BlockSize]).CryptBlocks(out, data)
	return unpad(out, 32)
}

// decryptECB is iLink's CDN scheme: AES-128-ECB with PKCS#7 padding.
func decryptECB(data, key []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("wechat: media key: %w", err)
	}
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, errBadMedia
	}
	out := make([]byte, len(data))
	for i := 0; i < len(data); i += aes.BlockSize {
		block.Decrypt(out[i:i+aes.BlockSize], data[i:i+aes.BlockSize])
	}
	return unpad(out, aes.BlockSize)
}

// unpad strips PKCS#7 padding of up to max bytes, checking every padding
// byte: a wrong key leaves random bytes there.
func unpad(b []byte, max int) ([]byte, error) {
	n := int(b[len(b)-1])
	if n == 0 || n > max || n > len(b) {
		return nil, errBadMedia
	}
	for _, c := range b[len(b)-n:] {
		if int(c) != n {
			return nil, errBadMedia
		}
	}
	return b[:len(b)-n], nil
}

// ilinkMediaKey turns what an iLink image item carries into its 16-byte
// key: image_item.aeskey (hex) when present, else media.aes_key, which is
// base64 of the raw key or of its hex.
func ilinkMediaKey(hexKey, b64Key string) ([]byte, error) {
	if hexKey != "" {
		k, err := hex.DecodeString(hexKey)
		if err != nil || len(k) != 16 {
			return nil, errors.New("wechat: iLink media: malformed aeskey")
		}
		return k, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64Key)
	if err != nil {
		return nil, errors.New("wechat: iLink media: malformed aes_key")
	}
	switch len(raw) {
	case 16:
		return raw, nil
	case 32:
		if k, err := hex.DecodeString(string(raw)); err == nil {
			return k, nil
		}
	}
	return nil, errors.New("wechat: iLink media: malformed aes_key")
}

// wecomMediaURL checks a WeCom media address: https on WeCom's media
// bucket (ww-aibot-img-….myqcloud.com), or a host the options add (tests).
func (a *Adapter) wecomMediaURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return nil, errors.New("wechat: WeCom media: malformed url")
	}
	host := strings.ToLower(u.Hostname())
	official := u.Scheme == "https" && u.Port() == "" &&
		strings.HasPrefix(host, "ww-aibot-img-") && strings.HasSuffix(host, ".myqcloud.com")
	if !official && !a.extraMediaHost(u) {
		return nil, fmt.Errorf("wechat: WeCom media on %q refused: not WeCom's media host", u.Host)
	}
	return u, nil
}

// ilinkMediaURL is the CDN download of an encrypt_query_param.
func (a *Adapter) ilinkMediaURL(param string) (*url.URL, error) {
	if param == "" {
		return nil, errors.New("wechat: iLink media: no encrypt_query_param")
	}
	u, err := url.Parse(strings.TrimRight(a.cfg.ILinkCDNURL, "/") + "/download")
	if err != nil {
		return nil, fmt.Errorf("wechat: iLink CDN url: %w", err)
	}
	u.RawQuery = url.Values{"encrypted_query_param": {param}}.Encode()
	return u, nil
}

// extraMediaHost reports whether u's scheme://host is one of
// wecom_media_hosts or Options.MediaHosts.
func (a *Adapter) extraMediaHost(u *url.URL) bool {
	for _, h := range append(a.cfg.WeComMediaHosts[:len(a.cfg.WeComMediaHosts):len(a.cfg.WeComMediaHosts)], a.opts.MediaHosts...) {
		if strings.EqualFold(h, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

// maxMediaRedirects bounds the redirects of one media download.
const maxMediaRedirects = 3

// mediaTimeout bounds one media download, body included.
const mediaTimeout = 60 * time.Second

// defaultMediaClient is the media client of Options' zero value.
func defaultMediaClient() *http.Client {
	return outbound.Client(outbound.Options{Timeout: mediaTimeout})
}

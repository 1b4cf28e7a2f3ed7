// Package wxcrypto is the callback scheme that Official Accounts, WeCom
// self-built apps and WeCom AI-bot webhooks share (Tencent's
// WXBizMsgCrypt): the SHA-1 signature over the sorted token, timestamp,
// nonce and ciphertext, AES-256-CBC with the EncodingAESKey, the receive
// id inside the plaintext, and the XML around it.
//
// Everything a callback is checked for — signature, freshness, ciphertext,
// padding, length, receive id — fails with one error, ErrRefused, and is
// answered with one response, WriteRefusal: whoever probes the endpoint
// learns nothing about which check stopped them. The reason is kept for
// the operator's metrics and log (Reason).
package wxcrypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// KeyLength is the length of an EncodingAESKey: 43 base64 characters, the
// 32-byte AES key without its trailing "=".
const KeyLength = 43

// block is the PKCS#7 block of the scheme: 32 bytes, not AES's 16.
const block = 32

// randomLength and lengthField frame the plaintext:
// random(16) ‖ msg_len (4 bytes, big-endian) ‖ msg ‖ receiveid.
const (
	randomLength = 16
	lengthField  = 4
)

// Crypter signs, verifies, encrypts and decrypts the callbacks of one
// account (one Official Account, one WeCom app). It is immutable and safe
// for concurrent use.
type Crypter struct {
	token     []byte
	key       []byte // 32 bytes; the IV is its first 16
	receiveID string
}

// New returns the Crypter for a callback configuration: the Token and
// EncodingAESKey set on the platform's console, and the receive id the
// plaintext must carry (the appid of an Official Account, the corpid of a
// WeCom app, empty for an AI bot). An empty key makes a Crypter that only
// signs and verifies (an Official Account in plaintext mode).
func New(token, encodingAESKey, receiveID string) (*Crypter, error) {
	if token == "" {
		return nil, errors.New("wxcrypto: the token is empty")
	}
	c := &Crypter{token: []byte(token), receiveID: receiveID}
	if encodingAESKey == "" {
		return c, nil
	}
	key, err := DecodeKey(encodingAESKey)
	if err != nil {
		return nil, err
	}
	c.key = key
	return c, nil
}

// DecodeKey checks an EncodingAESKey and returns the AES key it stands for.
// The error never contains the key.
func DecodeKey(encodingAESKey string) ([]byte, error) {
	if len(encodingAESKey) != KeyLength {
		return nil, fmt.Errorf("wxcrypto: an EncodingAESKey has %d characters, this one %d", KeyLength, len(encodingAESKey))
	}
	key, err := base64.StdEncoding.DecodeString(encodingAESKey + "=")
	if err != nil || len(key) != 32 {
		return nil, errors.New("wxcrypto: the EncodingAESKey is not base64 of 32 bytes")
	}
	return key, nil
}

// Encrypts reports whether c has an AES key (safe or compatible mode).
func (c *Crypter) Encrypts() bool { return c.key != nil }

// ReceiveID is the receive id c expects and writes.
func (c *Crypter) ReceiveID() string { return c.receiveID }

// Signature is hex(SHA-1(the parts sorted and concatenated)): the scheme's
// signature over token, timestamp, nonce and — for encrypted messages —
// the ciphertext.
func Signature(parts ...string) string {
	sorted := slices.Clone(parts)
	slices.Sort(sorted)
	sum := sha1.Sum([]byte(strings.Join(sorted, "")))
	return hex.EncodeToString(sum[:])
}

// Sign is the signature of a callback with c's token. encrypted is the
// ciphertext (msg_signature) or empty (the plain signature of an Official
// Account, over token, timestamp and nonce only).
func (c *Crypter) Sign(timestamp, nonce, encrypted string) string {
	if encrypted == "" {
		return Signature(string(c.token), timestamp, nonce)
	}
	return Signature(string(c.token), timestamp, nonce, encrypted)
}

// Verify reports whether got is the signature of the callback, comparing
// in constant time.
func (c *Crypter) Verify(got, timestamp, nonce, encrypted string) bool {
	want := c.Sign(timestamp, nonce, encrypted)
	return subtle.ConstantTimeCompare([]byte(strings.ToLower(got)), []byte(want)) == 1
}

// errNoKey is returned by Encrypt and Decrypt on a Crypter without a key.
var errNoKey = errors.New("wxcrypto: no EncodingAESKey is configured")

// Decrypt opens a ciphertext (base64) and returns the message inside. It
// checks, in order: base64, a whole number of 32-byte blocks, PKCS#7
// padding of 1 to 32 bytes with every padding byte, the message length
// against what is left, and the receive id. Every failure is ErrRefused
// with its Reason.
func (c *Crypter) Decrypt(encrypted string) ([]byte, error) {
	if c.key == nil {
		return nil, errNoKey
	}
	raw, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return nil, refuse(ReasonDecryptFailed, "ciphertext is not base64")
	}
	if len(raw) == 0 || len(raw)%block != 0 {
		return nil, refuse(ReasonDecryptFailed, fmt.Sprintf("ciphertext of %d bytes is not whole blocks", len(raw)))
	}
	b, err := aes.NewCipher(c.key)
	if err != nil {
		return nil, fmt.Errorf("wxcrypto: %w", err)
	}
	plain := make([]byte, len(raw))
	cipher.NewCBCDecrypter(b, c.key[:aes.BlockSize]).CryptBlocks(plain, raw)
	plain, ok := unpad(plain)
	if !ok {
		return nil, refuse(ReasonDecryptFailed, "bad padding")
	}
	if len(plain) < randomLength+lengthField {
		return nil, refuse(ReasonDecryptFailed, "plaintext too short")
	}
	n := uint64(binary.BigEndian.Uint32(plain[randomLength:]))
	rest := plain[randomLength+lengthField:]
	if n > uint64(len(rest)) {
		return nil, refuse(ReasonDecryptFailed, "message length beyond the plaintext")
	}
	msg, receiver := rest[:n], rest[n:]
	if subtle.ConstantTimeCompare(receiver, []byte(c.receiveID)) != 1 {
		return nil, refuse(ReasonWrongReceiver, "receive id does not match")
	}
	return msg, nil
}

// unpad removes PKCS#7 padding of a 32-byte block, checking every byte
// without branching on the padding's content.
func unpad(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	n := int(b[len(b)-1])
	if n < 1 || n > block || n > len(b) {
		return nil, false
	}
	var bad byte
	for _, p := range b[len(b)-n:] {
		bad |= p ^ byte(n)
	}
	return b[:len(b)-n], bad == 0
}

// Encrypt seals msg for a passive reply (or a test's callback) with a
// random prefix from crypto/rand.
func (c *Crypter) Encrypt(msg []byte) (string, error) {
	var random [randomLength]byte
	if _, err := rand.Read(random[:]); err != nil {
		return "", fmt.Errorf("wxcrypto: %w", err)
	}
	return c.EncryptWith(random, msg)
}

// EncryptWith seals msg with the given random prefix: deterministic, for
// known-answer tests.
func (c *Crypter) EncryptWith(random [randomLength]byte, msg []byte) (string, error) {
	if c.key == nil {
		return "", errNoKey
	}
	if uint64(len(msg)) > 1<<31 {
		return "", errors.New("wxcrypto: message too long")
	}
	plainLen := randomLength + lengthField + len(msg) + len(c.receiveID)
	pad := block - plainLen%block
	plain := make([]byte, 0, plainLen+pad)
	plain = append(plain, random[:]...)
	plain = binary.BigEndian.AppendUint32(plain, uint32(len(msg)))
	plain = append(plain, msg...)
	plain = append(plain, c.receiveID...)
	for range pad {
		plain = append(plain, byte(pad))
	}
	b, err := aes.NewCipher(c.key)
	if err != nil {
		return "", fmt.Errorf("wxcrypto: %w", err)
	}
	cipher.NewCBCEncrypter(b, c.key[:aes.BlockSize]).CryptBlocks(plain, plain)
	return base64.StdEncoding.EncodeToString(plain), nil
}

package feishu

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrDecrypt is returned by Decrypt for anything that is not a well-formed
// ciphertext under the key: bad base64, a short or misaligned ciphertext, or
// padding that is not PKCS#7.
var ErrDecrypt = errors.New("feishu: cannot decrypt event")

// Decrypt opens the "encrypt" field of an encrypted callback body: the key
// is SHA-256 of the app's Encrypt Key, the first 16 bytes of the decoded
// data are the IV, and the rest is AES-256-CBC with PKCS#7 padding. Unlike
// the SDK's EventDecrypt (which cuts the plaintext at its outermost braces)
// every padding byte is checked, so a corrupted or forged ciphertext is an
// error rather than a truncated event.
func Decrypt(encrypted, encryptKey string) ([]byte, error) {
	buf, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return nil, fmt.Errorf("%w: base64: %v", ErrDecrypt, err)
	}
	if len(buf) < 2*aes.BlockSize || len(buf)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("%w: ciphertext of %d bytes is not an IV and whole blocks", ErrDecrypt, len(buf))
	}
	key := sha256.Sum256([]byte(encryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	iv, data := buf[:aes.BlockSize], buf[aes.BlockSize:]
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, data)
	return unpad(out)
}

// unpad removes PKCS#7 padding, checking every padding byte.
func unpad(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty plaintext", ErrDecrypt)
	}
	n := int(b[len(b)-1])
	if n == 0 || n > aes.BlockSize || n > len(b) {
		return nil, fmt.Errorf("%w: bad padding", ErrDecrypt)
	}
	var bad byte
	for _, c := range b[len(b)-n:] {
		bad |= c ^ byte(n)
	}
	if bad != 0 {
		return nil, fmt.Errorf("%w: bad padding", ErrDecrypt)
	}
	return b[:len(b)-n], nil
}

// encrypt is the inverse of Decrypt with the given IV (16 bytes). Feishu
// encrypts; Parley only needs this to build test events.
func encrypt(plain []byte, encryptKey string, iv []byte) (string, error) {
	if len(iv) != aes.BlockSize {
		return "", fmt.Errorf("feishu: IV must be %d bytes", aes.BlockSize)
	}
	key := sha256.Sum256([]byte(encryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return "", err
	}
	n := aes.BlockSize - len(plain)%aes.BlockSize
	padded := make([]byte, len(plain)+n)
	copy(padded, plain)
	for i := len(plain); i < len(padded); i++ {
		padded[i] = byte(n)
	}
	out := make([]byte, aes.BlockSize+len(padded))
	copy(out, iv)
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out[aes.BlockSize:], padded)
	return base64.StdEncoding.EncodeToString(out), nil
}

// Signature is X-Lark-Signature: hex(SHA-256(timestamp + nonce + encrypt
// key + raw body)).
func Signature(timestamp, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write([]byte(nonce))
	h.Write([]byte(encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// validSignature compares in constant time.
func validSignature(got, timestamp, nonce, encryptKey string, body []byte) bool {
	want := Signature(timestamp, nonce, encryptKey, body)
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameSecret compares a presented token with the configured one in
// constant time.
func sameSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

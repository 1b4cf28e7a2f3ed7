package wxcrypto

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"testing"
)

// decryptRaw is AES-256-CBC under c's key without any check: the whole
// plaintext, padding included.
func decryptRaw(t *testing.T, c *Crypter, raw []byte) []byte {
	t.Helper()
	b, err := aes.NewCipher(c.key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(raw))
	cipher.NewCBCDecrypter(b, c.key[:aes.BlockSize]).CryptBlocks(out, raw)
	return out
}

// encryptRaw encrypts whole blocks as they are.
func encryptRaw(t *testing.T, c *Crypter, plain []byte) string {
	t.Helper()
	b, err := aes.NewCipher(c.key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(plain))
	cipher.NewCBCEncrypter(b, c.key[:aes.BlockSize]).CryptBlocks(out, plain)
	return base64.StdEncoding.EncodeToString(out)
}

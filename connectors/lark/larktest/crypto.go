package larktest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Header names of a signed Lark callback (event/model.go of the SDK).
const (
	HeaderTimestamp = "X-Lark-Request-Timestamp"
	HeaderNonce     = "X-Lark-Request-Nonce"
	HeaderSignature = "X-Lark-Signature"
)

// ErrDecrypt reports a ciphertext Decrypt cannot open: not base64, not whole
// AES blocks, or bad padding (usually the wrong key).
var ErrDecrypt = errors.New("larktest: cannot decrypt")

// Encrypt encrypts a callback payload as Lark does for an app with an Encrypt
// Key: AES-256-CBC with key = SHA-256(encryptKey), a random 16-byte IV
// prepended to the ciphertext, PKCS#7 padding, standard base64. The result is
// the value of the {"encrypt": "..."} body.
func Encrypt(encryptKey string, plaintext []byte) (string, error) {
	return encryptWith(rand.Reader, encryptKey, plaintext)
}

func encryptWith(random io.Reader, encryptKey string, plaintext []byte) (string, error) {
	key := sha256.Sum256([]byte(encryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return "", fmt.Errorf("larktest: encrypt: %w", err)
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	padded := make([]byte, len(plaintext)+pad)
	copy(padded, plaintext)
	for i := len(plaintext); i < len(padded); i++ {
		padded[i] = byte(pad)
	}
	out := make([]byte, aes.BlockSize+len(padded))
	if _, err := io.ReadFull(random, out[:aes.BlockSize]); err != nil {
		return "", fmt.Errorf("larktest: encrypt: reading IV: %w", err)
	}
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], padded)
	return base64.StdEncoding.EncodeToString(out), nil
}

// Decrypt reverses Encrypt and removes the PKCS#7 padding strictly. It is the
// counterpart a test needs to read what Encrypt produced, and it also opens
// the encrypted samples Lark publishes.
func Decrypt(encryptKey, encrypted string) ([]byte, error) {
	buf, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return nil, fmt.Errorf("%w: base64: %w", ErrDecrypt, err)
	}
	if len(buf) < 2*aes.BlockSize || len(buf)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not IV + whole blocks", ErrDecrypt, len(buf))
	}
	key := sha256.Sum256([]byte(encryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("larktest: decrypt: %w", err)
	}
	plain := make([]byte, len(buf)-aes.BlockSize)
	cipher.NewCBCDecrypter(block, buf[:aes.BlockSize]).CryptBlocks(plain, buf[aes.BlockSize:])
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > aes.BlockSize || !bytes.Equal(plain[len(plain)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, fmt.Errorf("%w: bad padding (wrong key?)", ErrDecrypt)
	}
	return plain[:len(plain)-pad], nil
}

// Signature is the X-Lark-Signature of a callback:
// hex(SHA-256(timestamp + nonce + encryptKey + body)), where body is the raw
// HTTP body as sent (the whole {"encrypt":"..."} JSON).
func Signature(timestamp, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write([]byte(nonce))
	h.Write([]byte(encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// randomHex returns n random bytes, hex-encoded.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		return "", fmt.Errorf("larktest: random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

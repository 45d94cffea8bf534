package ingest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
)

// errUndecryptable: the "encrypt" field is not a ciphertext of this key.
var errUndecryptable = errors.New("body does not decrypt with the encrypt key")

// callbackKey is the encrypt key's two uses, prepared once: the signature
// X-Lark-Signature = hex(sha256(timestamp + nonce + key + body)) and the AES-256-CBC
// decryption of the "encrypt" field under sha256(key). It computes what the SDK's
// larkevent.Signature and larkevent.EventDecrypt compute (TestCallbackKeyMatchesSDK)
// without their per-call copies of the body, key schedule and hex formatting, and
// returns an error where EventDecrypt panics. It is safe for concurrent use.
type callbackKey struct {
	key   string
	block cipher.Block
}

func newCallbackKey(key string) (*callbackKey, error) {
	sum := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(sum[:])
	if err != nil {
		return nil, err
	}
	return &callbackKey{key: key, block: block}, nil
}

// verify reports whether sig is the signature of body under timestamp ts and nonce,
// comparing in constant time.
func (k *callbackKey) verify(ts, nonce string, body []byte, sig string) bool {
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write([]byte(nonce))
	h.Write([]byte(k.key))
	h.Write(body)
	var sum [sha256.Size]byte
	var want [2 * sha256.Size]byte
	hex.Encode(want[:], h.Sum(sum[:0]))
	return subtle.ConstantTimeCompare(want[:], []byte(sig)) == 1
}

// decrypt opens the base64 "encrypt" field: the first block is the IV, the rest
// whole CBC blocks, and the plain text is what lies between the first '{' and the
// last '}' (the SDK's rule, which tolerates Lark's padding).
func (k *callbackKey) decrypt(encrypted []byte) ([]byte, error) {
	buf := make([]byte, base64.StdEncoding.DecodedLen(len(encrypted)))
	n, err := base64.StdEncoding.Decode(buf, encrypted)
	if err != nil {
		return nil, errUndecryptable
	}
	buf = buf[:n]
	if len(buf) < aes.BlockSize || len(buf)%aes.BlockSize != 0 {
		return nil, errUndecryptable
	}
	iv, text := buf[:aes.BlockSize], buf[aes.BlockSize:]
	cipher.NewCBCDecrypter(k.block, iv).CryptBlocks(text, text)
	first, last := bytes.IndexByte(text, '{'), bytes.LastIndexByte(text, '}')
	if first < 0 {
		first = 0
	}
	if last < 0 {
		last = len(text) - 1
	}
	if last < first-1 {
		return nil, errUndecryptable // the SDK panics on these slice bounds
	}
	return text[first : last+1], nil
}

package ingest

import (
	"bytes"
	"crypto/aes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"

	"github.com/larkline/larkline/connectors/lark/larktest"
)

// sdkDecrypt is larkevent.EventDecrypt with its panic (a wrong key can put the last
// '}' before the first '{') turned into an error.
func sdkDecrypt(encrypted, key string) (plain []byte, err error) {
	defer func() {
		if recover() != nil {
			plain, err = nil, errUndecryptable
		}
	}()
	return larkevent.EventDecrypt(encrypted, key)
}

// TestCallbackKeyMatchesSDK: the webhook's own signature and decryption compute
// what the SDK's larkevent.Signature and larkevent.EventDecrypt compute, for real
// callbacks, wrong keys, random ciphertexts and malformed fields.
func TestCallbackKeyMatchesSDK(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	for i := range 300 {
		key := base64.StdEncoding.EncodeToString(randBytes(1 + rng.IntN(40)))
		k, err := newCallbackKey(key)
		if err != nil {
			t.Fatal(err)
		}
		body := randBytes(rng.IntN(3000))
		ts, nonce := "17000000"+string(rune('0'+i%10)), base64.StdEncoding.EncodeToString(randBytes(8))
		sig := larkevent.Signature(ts, nonce, key, string(body))
		if !k.verify(ts, nonce, body, sig) {
			t.Fatalf("case %d: the SDK's signature does not verify", i)
		}
		if k.verify(ts, nonce, append(body, 'x'), sig) || k.verify(ts, nonce, body, sig[:len(sig)-1]) || k.verify(nonce, ts, body, sig) {
			t.Fatalf("case %d: a changed body, signature or header verifies", i)
		}

		plain := append([]byte(`{"schema":"2.0","n":`), randBytes(rng.IntN(500))...)
		plain = append(plain, '}')
		sealed, err := larktest.Encrypt(key, plain)
		if err != nil {
			t.Fatal(err)
		}
		other := base64.StdEncoding.EncodeToString(randBytes(aes.BlockSize * (1 + rng.IntN(20))))
		for _, c := range []struct {
			name, field, key string
		}{
			{"own key", sealed, key},
			{"wrong key", sealed, key + "x"},
			{"random ciphertext", other, key},
			{"short", base64.StdEncoding.EncodeToString(randBytes(rng.IntN(aes.BlockSize))), key},
			{"not whole blocks", base64.StdEncoding.EncodeToString(randBytes(aes.BlockSize + 1 + rng.IntN(aes.BlockSize-1))), key},
			{"not base64", "!" + sealed, key},
		} {
			ck, err := newCallbackKey(c.key)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := sdkDecrypt(c.field, c.key)
			got, gotErr := ck.decrypt([]byte(c.field))
			if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("case %d %s: decrypt = %.64q, %v; the SDK's %.64q, %v", i, c.name, got, gotErr, want, wantErr)
			}
			if c.name == "own key" && !bytes.Equal(got, plain) {
				t.Fatalf("case %d: decrypt of a callback = %q, want %q", i, got, plain)
			}
		}
	}
}

// TestEncryptedField: the "encrypt" field's text, with or without escapes, and
// nothing for a field that is absent, null or not a string.
func TestEncryptedField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw, want string
	}{
		{`"abc+/="`, "abc+/="},
		{`"ab\/c\u003d"`, "ab/c="},
		{`""`, ""},
		{``, ""},
		{`null`, ""},
		{`12`, ""},
		{`{"a":1}`, ""},
	} {
		if got := encryptedField([]byte(c.raw)); string(got) != c.want {
			t.Errorf("encryptedField(%s) = %q, want %q", c.raw, got, c.want)
		}
	}
}

// decodedEncrypted is the decoder's reading of an encrypted body: the "encrypt"
// field's text, and whether the body is JSON at all.
func decodedEncrypted(body []byte) (field []byte, valid bool) {
	var encrypted struct {
		Encrypt json.RawMessage `json:"encrypt"`
	}
	if err := json.Unmarshal(body, &encrypted); err != nil && !json.Valid(body) {
		return nil, false
	}
	return encryptedField(encrypted.Encrypt), true
}

// TestBareEncrypted: the decoder-free reading of {"encrypt":"…"} takes the bodies
// Lark sends and reads what the JSON decoder reads; any other body is left to the
// decoder, never misread (hand-picked shapes, then random mutations of a real one).
func TestBareEncrypted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		bare bool
	}{
		{`{"encrypt":"QUJDRA=="}`, true},
		{" \n{ \"encrypt\" :\t\"QUJD+/==\" }\r\n", true},
		{`{"encrypt":""}`, true},
		{`{"encrypt":"QU\/JD"}`, false},
		{`{"encrypt":"QUJD","x":1}`, false},
		{`{"x":1,"encrypt":"QUJD"}`, false},
		{`{"encrypt":"QUJD"}x`, false},
		{`{"encrypt":"QUJD"`, false},
		{`"encrypt":"QUJD"}`, false},
		{`{"encrypt":"QU JD"}`, false},
		{`{"encrypt":"QUJD "}`, false},
		{`{"Encrypt":"QUJD"}`, false},
		{"\v{\"encrypt\":\"QUJD\"}", false},
		{`{"encrypt":1}`, false},
		{``, false},
	} {
		field, bare := bareEncrypted([]byte(c.body))
		if bare != c.bare {
			t.Errorf("bareEncrypted(%q) = %v, want %v", c.body, bare, c.bare)
		}
		if want, valid := decodedEncrypted([]byte(c.body)); bare && (!valid || !bytes.Equal(field, want)) {
			t.Errorf("bareEncrypted(%q) = %q; the decoder reads %q (valid %v)", c.body, field, want, valid)
		}
	}
	sealed, err := larktest.Encrypt("key", []byte(`{"schema":"2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	real := []byte(`{"encrypt":"` + sealed + `"}`)
	if field, bare := bareEncrypted(real); !bare || string(field) != sealed {
		t.Fatalf("a real callback body is not read bare: %q %v", field, bare)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte(" \t\n\r\v{}\":,\\/+=aZ09x")
	for i := range 20000 {
		b := slices.Clone(real)
		for range 1 + rng.IntN(3) {
			switch p := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0: // replace
				if p < len(b) {
					b[p] = alphabet[rng.IntN(len(alphabet))]
				}
			case 1: // insert
				b = slices.Insert(b, p, alphabet[rng.IntN(len(alphabet))])
			default: // delete
				if p < len(b) {
					b = slices.Delete(b, p, p+1)
				}
			}
		}
		field, bare := bareEncrypted(b)
		if !bare {
			continue
		}
		if want, valid := decodedEncrypted(b); !valid || !bytes.Equal(field, want) {
			t.Fatalf("mutation %d: bareEncrypted(%q) = %q; the decoder reads %q (valid %v)", i, b, field, want, valid)
		}
	}
}

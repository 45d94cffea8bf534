package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
)

// decodeBody reads a request body of at most MaxBodyBytes holding exactly one JSON
// object into dst, rejecting unknown fields. On failure it answers the request (415,
// 413 or 400) and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst)
	if err == nil {
		// Exactly one value: anything but the end of the body after it is an error.
		if _, err = dec.Token(); errors.Is(err, io.EOF) {
			return true
		}
		if err == nil {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "the body is larger than the API accepts")
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, codeInvalidBody, "the body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, codeInvalidBody, "the body is truncated JSON")
	case errors.As(err, &syntax):
		writeError(w, http.StatusBadRequest, codeInvalidBody, "the body is not valid JSON: "+syntax.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			writeError(w, http.StatusBadRequest, codeInvalidBody, "the body must be a JSON object")
		} else {
			writeError(w, http.StatusBadRequest, codeInvalidBody, typ.Field+" has the wrong JSON type: expected "+typ.Type.String())
		}
	default:
		// Unknown fields ("json: unknown field \"x\"") and trailing data.
		writeError(w, http.StatusBadRequest, codeInvalidBody, err.Error())
	}
	return false
}

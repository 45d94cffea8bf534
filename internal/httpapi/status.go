package httpapi

import "net/http"

// StatusRecorder is an http.ResponseWriter that remembers the status code written
// through it, for request metrics and logs. Every larkline HTTP surface that counts
// requests by status (this API, the workspaces admin API) wraps its writer in one.
type StatusRecorder struct {
	http.ResponseWriter
	code int
}

// WriteHeader records the first status code and passes every call on.
func (r *StatusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 when nothing was written before.
func (r *StatusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *StatusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Written reports whether a status code or a body was written.
func (r *StatusRecorder) Written() bool { return r.code != 0 }

// Status is the status code written, or 200 when nothing was (what net/http sends
// for a handler that returns without writing).
func (r *StatusRecorder) Status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

package httpapi

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// The web page is plain HTML, CSS and JavaScript embedded in the binary: no build
// step, no external resources. The page is static and holds no data; it asks for an
// API token and reads everything through the API with a Bearer header.
//
//go:embed web/index.html web/static
var webFS embed.FS

type asset struct {
	content     []byte
	contentType string
	etag        string
}

type webAssets struct {
	page   asset
	static map[string]asset
}

var contentTypes = map[string]string{
	".css": "text/css; charset=utf-8",
	".js":  "text/javascript; charset=utf-8",
	".svg": "image/svg+xml",
}

func newAsset(b []byte, contentType string) asset {
	sum := sha256.Sum256(b)
	return asset{content: b, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

func loadWebAssets() (*webAssets, error) {
	page, err := webFS.ReadFile("web/index.html")
	if err != nil {
		return nil, fmt.Errorf("read embedded web page: %w", err)
	}
	w := &webAssets{page: newAsset(page, "text/html; charset=utf-8"), static: map[string]asset{}}
	entries, err := fs.ReadDir(webFS, "web/static")
	if err != nil {
		return nil, fmt.Errorf("read embedded web assets: %w", err)
	}
	for _, e := range entries {
		ct, ok := contentTypes[path.Ext(e.Name())]
		if e.IsDir() || !ok {
			return nil, fmt.Errorf("embedded web asset %q has no known content type", e.Name())
		}
		b, err := webFS.ReadFile("web/static/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded web asset %q: %w", e.Name(), err)
		}
		w.static[e.Name()] = newAsset(b, ct)
	}
	return w, nil
}

// pageCSP allows only the page's own script, style and API: no inline script, no
// third-party origin, no framing.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func serveAsset(w http.ResponseWriter, r *http.Request, a asset) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache") // revalidate: a new binary must show its new page
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.content))
}

// servePage serves the timeline page of one workspace. The workspace id is read by the
// page's script from the path; an invalid id is a 404 here.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	if _, err := ids.ParseWorkspaceID(r.PathValue("workspace")); err != nil {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	serveAsset(w, r, s.web.page)
}

func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	a, ok := s.web.static[r.PathValue("file")]
	if !ok {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	serveAsset(w, r, a)
}

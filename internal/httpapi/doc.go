// Package httpapi serves larkline's timeline API (JSON under /api/v1) and the web
// timeline page a responder keeps open during an incident. [New] returns a [Server],
// an http.Handler that the process mounts on its shared listener under [Server.Patterns]
// (or with [Server.Mount]).
//
// Every route takes a workspace id and a bearer token whose SHA-256 is configured with
// a workspace scope and a change scope (read, curate, admin). The evidence listing is
// keyset-paginated behind an HMAC-authenticated cursor; the timeline, the summary and
// a person's edits go through the [Store] interface only, and a person's edit is never
// overwritten by automatic synthesis. Errors are JSON with a stable code. The page is
// static (embedded, strict CSP) and reads the API with the responder's token.
//
// Logs carry ids, token names, field names and error classes, never message text,
// entry or summary text, tokens or store error text. docs/operations.md ("How the
// timeline API and page answer") lists the routes, every error code, the access rules
// in their order, the page and the bounds.
package httpapi

// Package httpapi serves larkline's timeline API (JSON under /api/v1) and the web
// timeline page a responder keeps open during an incident. [New] returns a [Server],
// an http.Handler that the process mounts on its shared listener under [Server.Patterns]
// (or with [Server.Mount]).
//
// # API
//
// Every route takes a workspace id and a bearer token:
//
//	GET   /api/v1/workspaces/{workspace}/evidence?limit=&cursor=&since=
//	GET   /api/v1/workspaces/{workspace}/timeline
//	PATCH /api/v1/workspaces/{workspace}/timeline/{entry}
//	GET   /api/v1/workspaces/{workspace}/summary
//	PUT   /api/v1/workspaces/{workspace}/summary
//
// The evidence listing pages through the workspace's Lark message evidence in
// (occurred_at, id) order by keyset, so equal timestamps never repeat or skip a row
// between pages and no request reads more than one page: limit defaults to
// [DefaultPageSize]; above [MaxPageSize] it is a 400 invalid_limit, not silently lowered.
// Its answer is {"items":[…],"next_cursor":"…"}, without next_cursor on the last page.
// The cursor is opaque (a versioned position authenticated by an HMAC bound to the
// workspace; see Options.CursorKey): an altered, truncated or foreign cursor is a 400
// invalid_cursor. since (RFC 3339) starts the listing at a time instead. Lark evidence
// is listed only when Options.EvidenceListed is set (design §15, evidenceListedInAPI);
// otherwise every authorised request gets 404 evidence_listing_disabled.
//
// The timeline is {"workspace":{…},"evidence_listed":bool,"entries":[…]}: the entries
// that are not hidden, in (occurred_at, id) order, each with its status, source,
// human_edited marker, needs_review marker (a message it cites was recalled and the
// entry is a person's or curated one, kept as it is: a person should look; an edit
// clears it), withdrawn marker (an untouched AI draft that cited a recalled message:
// hidden, title and body emptied) and evidence_ids. PATCH lets a person confirm, hide (or show
// again), retitle, reword, reclassify or move an entry: it becomes human-edited and no
// automatic process changes its text again. PUT summary stores a person's summary
// (source=human), which automatic summaries never overwrite.
//
// GET compare?version=B compares what the serving processor version shows of the
// workspace with what version B wrote (decisions D26): {"serving":"v1","version":"v2",
// "only_serving":[…],"only_version":[…],"changed":[{"serving":…,"version":…}],
// "summary_changed":bool,"windows_only_serving":n,"windows_only_version":n}; entries as
// {id, fingerprint, occurred_at, kind, status, title, body}. The page shows it with
// ?compare=B.
//
// Errors are JSON, {"error":{"code":"…","message":"…"}}, with a stable code:
// invalid_workspace_id, invalid_entry_id, invalid_limit, invalid_cursor, invalid_since,
// invalid_body, invalid_field, empty_patch, invalid_version (400); missing_token, invalid_token (401);
// api_disabled, forbidden_workspace, forbidden_scope (403); not_found, workspace_not_found,
// entry_not_found, summary_not_found, evidence_listing_disabled, version_not_found (404);
// method_not_allowed (405); body_too_large (413); unsupported_media_type (415);
// internal (500); store_unavailable (503, with Retry-After, when store.IsRetryable).
//
// # Access rules
//
// Tokens come from configuration as hex SHA-256 hashes, each scoped to a list of
// workspaces or to all ("*"). The checks run in this order: no token configured →
// 403 api_disabled (the API refuses everything); no Authorization header → 401
// missing_token; a token matching no hash → 401 invalid_token; a change (PATCH an
// entry, PUT the summary) with a token of scope read, the default → 403
// forbidden_scope (Token.Scope: read, curate, admin; issue #29); a malformed workspace id
// → 400; a token not scoped to the workspace → 403 forbidden_workspace; an unknown
// workspace → 404 workspace_not_found. The presented token is hashed and compared with
// every configured hash in constant time. Bodies are bounded by [MaxBodyBytes] and must
// be one JSON object with known fields only.
//
// # Web page
//
// GET /workspaces/{workspace} serves a static page (embedded HTML, CSS and JavaScript
// under /static/, no build step, a strict Content-Security-Policy). It holds no data:
// it asks for an API token, kept in the tab's sessionStorage or taken once from
// #token=… in the URL fragment (never a query string), and reads the API with a Bearer
// header every 15 seconds. It shows the summary on top and the entries in time order
// with kind badges and status, times in local time with UTC on hover; each entry
// expands to the messages it came from (sender, time, text, a note for recalled
// messages), read from the evidence listing when it is enabled. #expand=all opens
// every entry.
//
// # Bounds
//
// The package reads and writes only through the [Store] interface (workspaces,
// evidence pages, visible entries, human edits, summaries); it never writes evidence or
// synthesis state. Each request's store calls are bounded by Options.StoreTimeout. Logs
// carry workspace and entry ids, token names, field names and error classes, never
// message text, entry or summary text, tokens or store error text. Metrics:
// larkline_api_requests_total{route,code}, larkline_api_request_duration_seconds{route}
// and larkline_api_auth_refusals_total{reason}, all with bounded labels. No TLS, CORS
// or rate limiting: the shared listener and the deployment own those.
package httpapi

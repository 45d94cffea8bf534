package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"

	"github.com/larkline/larkline/schemas/ids"
)

// ---- fixtures

// evidenceNative is r in goavro's native form, as Encode hands it to goavro
// (without schema_version).
func evidenceNative(t testing.TB, r EvidenceRecord) map[string]any {
	t.Helper()
	c, err := NewEvidenceCodec()
	if err != nil {
		t.Fatal(err)
	}
	return toNative(c.fields, reflect.ValueOf(&r).Elem())
}

const (
	testWorkspace = ids.WorkspaceID("ws-incident-42")
	testChat      = ids.ChatID("oc_a0553eda9014c201e6969b478895c230")
	testMessage   = ids.MessageID("om_dc13264520392913993dd051dba21dcf")
)

var testTime = time.Date(2026, 11, 30, 2, 13, 7, 123_000_000, time.UTC)

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// sampleEvidence has every nullable field set.
func sampleEvidence() EvidenceRecord {
	return EvidenceRecord{
		WorkspaceID:      testWorkspace,
		ChatID:           testChat,
		MessageID:        testMessage,
		Source:           ids.SourceLark,
		SourceType:       ids.SourceTypeLarkMessage,
		SourceKey:        ids.MessageSourceKey(testChat, testMessage),
		OccurredAt:       testTime,
		SourceUpdatedAt:  testTime.Add(2 * time.Second),
		ObservedAt:       testTime.Add(3 * time.Second),
		ActorID:          "ou_7d8a6e6df7621556ce0d21922b676706ccs",
		ActorDisplayName: "Alice 王",
		MessageType:      "text",
		Content:          "primary database failover started; 数据库主从切换中",
		ContentHash:      hashOf("primary database failover started"),
		Deleted:          false,
		IneligibleReason: "",
		// An eligible message has no reason; sampleEvidenceIneligible sets one.
		SynthesisEligible: true,
		ThreadID:          "omt_1a3b5c7d9e",
		RootID:            "om_root0000000000000000000000001",
		ParentID:          "om_parent00000000000000000000002",
		MetadataJSON:      `{"chat_type":"group","mentions":["ou_1"]}`,
		IngestPath:        IngestEvent,
	}
}

// sampleEvidenceNulls has every nullable field null.
func sampleEvidenceNulls() EvidenceRecord {
	r := sampleEvidence()
	r.ActorDisplayName, r.ThreadID, r.RootID, r.ParentID = "", "", "", ""
	r.SynthesisEligible, r.IneligibleReason = false, IneligibleOwnApp
	r.IngestPath = IngestReconcile
	return r
}

func sampleEvidenceDeleted() EvidenceRecord {
	r := sampleEvidence()
	r.Content, r.Deleted, r.SynthesisEligible, r.IneligibleReason = "", true, false, IneligibleDeleted
	r.ContentHash = hashOf("deleted")
	r.MetadataJSON = "{}"
	r.IngestPath = IngestRefresh
	return r
}

func sampleWindow() ClosedWindow {
	start := time.Date(2026, 11, 30, 2, 10, 0, 0, time.UTC)
	return ClosedWindow{
		WorkspaceID:       testWorkspace,
		ChatID:            testChat,
		WindowStart:       start,
		WindowEnd:         start.Add(10 * time.Minute),
		ProcessorVersion:  "v1",
		EvidenceCount:     3,
		ClosedAt:          start.Add(13 * time.Minute),
		Reason:            CloseReasonGraceElapsedHistoryCovered,
		EvidencePartition: 2,
		EvidenceLowOffset: 40,
		EvidenceEndOffset: 57,
		FirstOccurredAt:   start.Add(30 * time.Second),
		LastOccurredAt:    start.Add(90 * time.Second),
		Oversized:         true,
	}
}

func sampleCheckpoint() CollectionCheckpoint {
	return CollectionCheckpoint{
		WorkspaceID:        testWorkspace,
		ChatID:             testChat,
		CoveredUntil:       testTime,
		CursorCreateTimeMS: testTime.Add(-time.Minute).UnixMilli(),
		CursorMessageID:    testMessage,
		UpdatedAt:          testTime.Add(time.Second),
		ReconcileVersion:   "r1",
		EvidenceEndOffset:  42,
	}
}

func sampleCheckpointEmpty() CollectionCheckpoint {
	p := sampleCheckpoint()
	p.CursorCreateTimeMS, p.CursorMessageID, p.EvidenceEndOffset = 0, "", 0
	return p
}

func sampleWorkspace() WorkspaceRecord {
	return WorkspaceRecord{
		ID:        testWorkspace,
		Type:      "incident",
		Status:    "firing",
		CreatedAt: testTime.Add(-time.Hour),
		Version:   7,
		Chats:     []ids.ChatID{testChat, "oc_second"},
		UpdatedAt: testTime,
	}
}

func sampleDeadLetter() DeadLetter {
	return DeadLetter{
		Stage:          string(ids.StageSink),
		Reason:         ReasonUnknownSchema,
		Error:          "decode io.larkline.EvidenceRecord (avro-crc64:0011223344556677): unknown writer schema",
		Topic:          DefaultEvidenceTopic,
		Partition:      3,
		Offset:         1 << 40,
		Key:            []byte(ids.EvidenceKey(testWorkspace, testChat, testMessage)),
		Value:          []byte{0xC3, 0x01, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x02},
		FailedAt:       testTime,
		OriginalSchema: "avro-crc64:0011223344556677",
	}
}

// ---- a schema registry that behaves like Confluent's, for the parts we use

type fakeRegistry struct {
	username, password, token string

	mu       sync.Mutex
	schemas  []string          // id = index + 1
	byText   map[string]int    // schema text → id
	subjects map[string][]int  // subject → ids
	requests map[string]int    // "POST subjects", "GET ids" → count
	status   map[string]int    // forced status for the next requests of a kind
	lastCT   map[string]string // kind → Content-Type of the last request
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{
		byText:   map[string]int{},
		subjects: map[string][]int{},
		requests: map[string]int{},
		status:   map[string]int{},
		lastCT:   map[string]string{},
	}
}

// add stores a schema directly (as another producer would have) and returns its id.
func (f *fakeRegistry) add(subject, schema string) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint32(f.addLocked(subject, schema))
}

func (f *fakeRegistry) addLocked(subject, schema string) int {
	id, ok := f.byText[schema]
	if !ok {
		f.schemas = append(f.schemas, schema)
		id = len(f.schemas)
		f.byText[schema] = id
	}
	f.subjects[subject] = append(f.subjects[subject], id)
	return id
}

func (f *fakeRegistry) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[kind]
}

func (f *fakeRegistry) schema(id int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.schemas[id-1]
}

func (f *fakeRegistry) contentType(kind string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastCT[kind]
}

func (f *fakeRegistry) forceStatus(kind string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[kind] = status
}

func writeRegistryJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func registryError(w http.ResponseWriter, status, code int, msg string) {
	writeRegistryJSON(w, status, map[string]any{"error_code": code, "message": msg})
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var kind string
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "subjects" && parts[2] == "versions":
		kind = "POST subjects"
	case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "schemas" && parts[1] == "ids":
		kind = "GET ids"
	default:
		registryError(w, http.StatusNotFound, 404, "HTTP 404 Not Found")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[kind]++
	f.lastCT[kind] = r.Header.Get("Content-Type")
	if f.username != "" {
		u, p, ok := r.BasicAuth()
		if !(ok && u == f.username && p == f.password) && r.Header.Get("Authorization") != "Bearer "+f.token {
			registryError(w, http.StatusUnauthorized, 401, "Unauthorized")
			return
		}
	}
	if s := f.status[kind]; s != 0 {
		registryError(w, s, s*100+1, "forced failure")
		return
	}
	switch kind {
	case "POST subjects":
		if ct := r.Header.Get("Content-Type"); ct != "application/vnd.schemaregistry.v1+json" {
			registryError(w, http.StatusUnsupportedMediaType, 415, "bad content type "+ct)
			return
		}
		var req struct {
			Schema string `json:"schema"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			registryError(w, http.StatusBadRequest, 400, "bad body")
			return
		}
		if _, err := goavro.NewCodec(req.Schema); err != nil {
			registryError(w, http.StatusUnprocessableEntity, 42201, "Invalid schema")
			return
		}
		writeRegistryJSON(w, http.StatusOK, map[string]any{"id": f.addLocked(parts[1], req.Schema)})
	case "GET ids":
		id, err := strconv.Atoi(parts[2])
		if err != nil || id < 1 || id > len(f.schemas) {
			registryError(w, http.StatusNotFound, 40403, fmt.Sprintf("Schema %s not found", parts[2]))
			return
		}
		writeRegistryJSON(w, http.StatusOK, map[string]any{"schema": f.schemas[id-1]})
	}
}

// startRegistry serves a fake registry over real HTTP.
func startRegistry(t testing.TB) (*fakeRegistry, *Registry) {
	t.Helper()
	fake := newFakeRegistry()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	reg, err := NewRegistry(RegistryOptions{URL: srv.URL, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	return fake, reg
}

// handlerTransport serves requests in-process, for fuzzing and benchmarks.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func inProcessRegistry(t testing.TB) (*fakeRegistry, *Registry) {
	t.Helper()
	fake := newFakeRegistry()
	reg, err := NewRegistry(RegistryOptions{URL: "http://registry.invalid", Transport: handlerTransport{fake}, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	return fake, reg
}

func mustSchemaText(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

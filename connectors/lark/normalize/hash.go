package normalize

import "github.com/larkline/larkline/schemas"

// ref is one semantic reference of a message's content (an attachment key, a file
// name, a shared chat id, …). refs are part of the content hash (schemas.ContentHash,
// the evidence contract's canonical encoding) and of the metadata.
type ref = schemas.ContentRef

package idbstore

import _ "embed"

// packJS is the maker of packRecord (see fast_js.go), evaluated once with
// Function; a page whose CSP refuses it reads every record field by field.
//
//go:embed pack.js
var packJS string

// Slots of the packed numbers (float64, NaN = absent).
const (
	pV = iota
	pSchema
	pAttempts
	pSends
	pMaxAttempts
	pNextAttemptAt
	pLeaseToken
	pLeaseExpiresAt
	pSeq
	pCreatedAt
	pUpdatedAt
	pAckedAt
	pAuthGeneration
	pPayloadLen    // payload's length; NaN: none
	pLastError     // 1: a lastError object; NaN: none
	pErrStatus     // lastError.status
	pErrAt         // lastError.at
	pResponse      // 1: a response object; NaN: none
	pRespStatus    // response.status
	pRespReplayed  // response.replayed: 0, 1, NaN
	pRespBodyLen   // response.body's length; NaN: none
	pDeps          // dependencyIds' count; NaN: none
	packedNumbers  // count
	packScratchLen = 64 << 10
)

// packNumbers are the stored record's top-level number fields, in the
// order of their slots (pV to pAuthGeneration), and packStrings its string
// fields, in the order their slots follow the numbers (then lastError's
// code and message, then the dependency IDs). Go hands both to pack.js,
// which holds no copy; TestPackFieldsMatchRecord checks them against the
// fields appendRecordJSON writes.
var (
	packNumbers = [pPayloadLen]string{"v", "payloadSchemaVersion", "attempts", "sends", "maxAttempts", "nextAttemptAt",
		"leaseToken", "leaseExpiresAt", "seq", "createdAt", "updatedAt", "ackedAt", "authGeneration"}
	packStrings = [...]string{"id", "operationKey", "idempotencyKey", "entityType", "entityId", "operationType",
		"payloadRef", "payloadHash", "status", "leaseOwner", "userId", "tenantId"}
)

// What openlaked's admin listener serves: the metrics of the KV pool, the object store and the
// process, and readiness (the pool up, every erasure set with a write quorum).
#pragma once

#include "absl/time/time.h"
#include "object_store.h"
#include "openlake/admin.h"
#include "openlake/kv/service.h"

openlake::AdminSources MakeAdminSources(openlake::kv::KvService* kv, ObjectStoreNode* objects,
                                        absl::Time started);

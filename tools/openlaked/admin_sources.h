// What openlaked's admin listener serves: the metrics of the KV pool, the object store, the
// reactors (busy ratio, ring submissions) and the process, and readiness (the pool up, every erasure set with a write quorum).
#pragma once

#include "absl/time/time.h"

#include "object_store.h"

#include "openlake/admin.h"
#include "openlake/cluster/membership.h"
#include "openlake/io/reactor.h"
#include "openlake/kv/service.h"

// `membership` (may be null: no cluster) must outlive the admin listener.
openlake::AdminSources MakeAdminSources(openlake::io::Runtime* rt, openlake::kv::KvService* kv,
                                        ObjectStoreNode* objects,
                                        const openlake::cluster::Membership* membership,
                                        absl::Time started);

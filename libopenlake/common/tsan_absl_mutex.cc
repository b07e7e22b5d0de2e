// ThreadSanitizer builds only (tools/scripts/tsan.sh; meson adds this file and the --wrap
// link flags when b_sanitize is thread). Debian's abseil is not built with -fsanitize=thread,
// so TSan never sees absl::Mutex lock or unlock and reports every access a Mutex guards as a
// race. The linker sends our calls to Mutex::Lock, Unlock, ReaderLock, ReaderUnlock, TryLock
// and CondVar::Wait/WaitWithTimeout here (-Wl,--wrap), and these tell TSan what the real call
// (__real_...) did.
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#define OL_TSAN_EXPORT extern "C" __attribute__((visibility("default")))

using absl::CondVar;
using absl::Duration;
using absl::Mutex;

extern "C" {
void __real__ZN4absl7debian35Mutex4LockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu);
void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu);
bool __real__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu);
void __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu);
bool __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(CondVar* cv,
                                                                                 Mutex* mu,
                                                                                 Duration d);
}

OL_TSAN_EXPORT void __wrap__ZN4absl7debian35Mutex4LockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_mutex_post_lock(mu, 0, 0);
}

OL_TSAN_EXPORT void __wrap__ZN4absl7debian35Mutex6UnlockEv(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
  __tsan_mutex_post_unlock(mu, 0);
}

OL_TSAN_EXPORT void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, __tsan_mutex_read_lock);
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_mutex_post_lock(mu, __tsan_mutex_read_lock, 0);
}

OL_TSAN_EXPORT void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, __tsan_mutex_read_lock);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
  __tsan_mutex_post_unlock(mu, __tsan_mutex_read_lock);
}

OL_TSAN_EXPORT bool __wrap__ZN4absl7debian35Mutex7TryLockEv(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, __tsan_mutex_try_lock);
  const bool locked = __real__ZN4absl7debian35Mutex7TryLockEv(mu);
  __tsan_mutex_post_lock(mu, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

// A wait releases the mutex and holds it again when it returns.
OL_TSAN_EXPORT void __wrap__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(cv, mu);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

OL_TSAN_EXPORT bool __wrap__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    CondVar* cv, Mutex* mu, Duration d) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  const bool timed_out =
      __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(cv, mu, d);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

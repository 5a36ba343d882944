#include "comm/launcher_store.hpp"

#include <c10/util/Exception.h>

#include "launch/store_client.hpp"

namespace hp::comm {

using Ms = std::chrono::milliseconds;

namespace {

std::string text_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

LauncherStore::LauncherStore(std::string host, int port, std::string prefix, Ms timeout)
    : c10d::Store(timeout), host_(std::move(host)), port_(port), prefix_(std::move(prefix)) {
  try {
    client_ = std::make_unique<launch::StoreClient>(host_, port_, timeout, timeout);
  } catch (const launch::StoreError& e) {
    TORCH_CHECK(false, e.what(), " (is node 0's launcher running, with the same launch.master_addr and launch.master_port?)");
  }
}

LauncherStore::~LauncherStore() = default;

template <typename F>
auto LauncherStore::guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    client_->set_op_timeout(timeout_);
    return f();
  } catch (const launch::StoreError& e) {
    TORCH_CHECK(false, what, ": ", e.what());
  }
}

std::vector<std::string> LauncherStore::keys_of(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefix_ + k);
  return out;
}

void LauncherStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  guarded("set", [&] { client_->set(prefix_ + key, text_of(value)); });
}

std::vector<uint8_t> LauncherStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                               const std::vector<uint8_t>& desired) {
  return bytes_of(guarded("compareSet", [&] { return client_->compare_set(prefix_ + key, text_of(expected), text_of(desired)); }));
}

std::vector<uint8_t> LauncherStore::get(const std::string& key) {
  wait({key}, timeout_);
  auto v = guarded("get", [&] { return client_->get(prefix_ + key); });
  TORCH_CHECK(v.has_value(), "get: key ", key, " vanished from the store at ", client_->where());
  return bytes_of(*v);
}

int64_t LauncherStore::add(const std::string& key, int64_t value) {
  return guarded("add", [&] { return client_->add(prefix_ + key, value); });
}

bool LauncherStore::deleteKey(const std::string& key) {
  return guarded("deleteKey", [&] { return client_->remove(prefix_ + key); });
}

bool LauncherStore::check(const std::vector<std::string>& keys) {
  return guarded("check", [&] { return client_->check(keys_of(keys)); });
}

int64_t LauncherStore::getNumKeys() {
  return guarded("getNumKeys", [&] { return client_->num_keys(); });
}

void LauncherStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void LauncherStore::wait(const std::vector<std::string>& keys, const Ms& timeout) {
  // c10d's kNoTimeout (0) waits for ever; a week is as long here.
  const Ms limit = timeout.count() > 0 ? timeout : Ms(7LL * 24 * 3600 * 1000);
  const bool met = guarded("wait", [&] { return client_->wait(keys_of(keys), limit); });
  TORCH_CHECK(met, "wait: keys not set within the timeout of ", timeout.count(), " ms at the store at ",
              client_->where());
}

c10::intrusive_ptr<c10d::Store> LauncherStore::clone() {
  return c10::make_intrusive<LauncherStore>(host_, port_, prefix_, timeout_);
}

}  // namespace hp::comm

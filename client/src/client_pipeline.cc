#include "client_pipeline.h"

#include <string_view>

#include "gt/settings.h"
#include "ir/codec.h"
#include "host/host_snapshot.h"
#include "host/shipped_configs.h"

namespace gt::client_internal {
namespace {

// The terminal's `stage` label: what it does with an instruction.
constexpr const char* kTerminalName = "send";

}  // namespace

Result<std::optional<HostManifest>> ClientManifestFromEnv() {
  if (std::optional<std::string> file = TextSetting("GT_CLIENT_MANIFEST")) {
    Result<HostManifest> m = LoadManifestFile(*file, HostKind::kClient);
    if (!m.ok()) return InvalidArgument("GT_CLIENT_MANIFEST: " + m.status().message());
    return std::optional<HostManifest>(std::move(*m));
  }
  Result<bool> compiled = CompileStagesFromEnv();
  if (!compiled.ok()) return compiled.status();
  if (!*compiled) return std::optional<HostManifest>();
  Result<HostManifest> m = LoadShippedManifest("client-compile.yaml", HostKind::kClient);
  if (!m.ok()) return m.status();
  return std::optional<HostManifest>(std::move(*m));
}

ClientPipeline::ClientPipeline(HostManifest manifest, Sink sink)
    : manifest_(std::move(manifest)), sink_(std::move(sink)), metrics_(HostKind::kClient, manifest_.id, registry_) {}

Result<std::unique_ptr<ClientPipeline>> ClientPipeline::Create(const HostManifest& manifest, Sink sink) {
  if (manifest.host != HostKind::kClient) return InvalidArgument(manifest.source + ": not a client manifest");
  std::unique_ptr<ClientPipeline> p(new ClientPipeline(manifest, std::move(sink)));
  Result<std::unique_ptr<Pipeline>> pipeline = Pipeline::Build(p->manifest_, p->metrics_, p->registry_);
  if (!pipeline.ok()) return pipeline.status();
  p->pipeline_ = std::move(*pipeline);
  p->pipeline_->SetTerminal(p.get(), kTerminalName);
  ClientPipeline* self = p.get();
  p->pipeline_->SetErrorSink([self](const OpRef& ref, const Status& status) {
    self->errors_.push_back(MakeOpError(ref, status, self->manifest_.id));
  });
  return p;
}

std::vector<wire::OpError> ClientPipeline::TakeErrors() {
  std::vector<wire::OpError> out;
  out.swap(errors_);
  return out;
}

wire::HostSnapshot ClientPipeline::Snapshot() const {
  return TakeSnapshot(registry_, HostKind::kClient, manifest_.id, PipelineStageNames(manifest_, kTerminalName));
}

}  // namespace gt::client_internal

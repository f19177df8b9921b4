// `lacuna import hf`: a Hugging Face config.json → an annotated scenario
// (docs/import.md). Text models: LlamaForCausalLM (and Mistral), Qwen2/Qwen3
// dense and MoE, MixtralForCausalLM, DeepseekV3ForCausalLM (MLA approximated,
// said in a comment). Vision encoders: ViT, CLIP, SigLIP, InternViT, and the
// vision towers of LLaVA, InternVL, Qwen2-VL and Qwen3-VL configs that nest a
// vision_config beside the text model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/importer/annotated.h"
#include "sim/importer/layout.h"

namespace lacuna::importer {

struct ConfigFile {
  std::string text;
  std::string path;  // for messages and comments
};

struct HfOptions {
  LayoutOptions layout;
  // Extra vision encoders (standalone ViT / SigLIP / InternViT config.json
  // files), each added to model.encoders after any the main config nests.
  std::vector<ConfigFile> encoders;
  int64_t images_per_sample = 0;  // 0: 1 per sample (default)
  int64_t image_size = 0;         // 0: the config's image_size (Qwen-VL: 448)
};

// Throws lacuna::Error for JSON that is not an object, an architecture lacuna
// does not map (naming the keys it could and could not map), or a required
// key that is missing.
Annotated import_hf(const ConfigFile& config, const HfOptions& options);

}  // namespace lacuna::importer

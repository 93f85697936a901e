// The upload's metric step: the human-only warning stands out when "No metric" is chosen.
// Without JavaScript the warning is shown as plain text under the choice.
document.addEventListener("DOMContentLoaded", () => {
  const select = document.querySelector("#metric-form select[name=metric]");
  const warning = document.getElementById("human-only-warning");
  if (!select || !warning) return;
  const update = () => warning.classList.toggle("active", select.value === "none");
  select.addEventListener("change", update);
  update();
});

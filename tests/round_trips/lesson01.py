from . import WrongAnswer

WRONG = WrongAnswer(
    "01_tensors_devices", "predict",
    "def predict(model, inputs):\n"
    "    model_device = next(model.parameters()).device\n"
    "    inputs.to(model_device)\n"
    "    with torch.no_grad():\n"
    "        outputs = model(inputs)\n"
    "    return outputs.cpu()\n",
    "returns a new tensor: assign it")
